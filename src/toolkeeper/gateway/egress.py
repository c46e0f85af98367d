"""The network of a sandboxed stdio upstream whose config lists hosts: ``network = [...]``.

The sandbox keeps a network namespace of its own, with loopback alone: nothing inside can reach
the host's network by itself. Its one way out is a unix socket bound into it, served on the
host by ``EgressProxy``, a filtering HTTP proxy (``CONNECT host:port`` for TLS, which stays end
to end; plain ``http://`` requests forwarded). Inside, a small forwarder (``FORWARDER``, the
Python standard library alone) listens on the sandbox's loopback and carries each connection
to that socket; the server is told of it by the usual variables (``HTTPS_PROXY``,
``HTTP_PROXY``, ``ALL_PROXY``, their lower-case forms, and npm's). A program that ignores
them has no network at all: it fails closed.

The proxy decides on the host: the host asked for must be on the list (an entry allows the
host and its subdomains, on ports 443 and 80, or on the one port it names), and the name is
resolved here, once, every address checked as the web tools check theirs
(``builtins.http.public_address``): loopback, private, link-local and the other addresses
inside the network are refused unless the list names that address itself. The connection
goes to the address checked, so a name that resolves elsewhere a moment later (DNS
rebinding) changes nothing. Each refusal answers the program ``403`` with a message naming
the upstream, the host and the key that allows it, and is logged for the operator as one
line.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import re
import selectors
import shutil
import socket
import socketserver
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

from ..builtins.http import domain_allowed, public_address
from ..sandbox.base import UNPRIVILEGED_UID

__all__ = ["FORWARDER", "INSIDE_PORT", "INSIDE_SOCKET", "EgressProxy", "EgressRule",
           "Refused", "proxy_env", "rules"]

_log = logging.getLogger("toolkeeper.gateway")

INSIDE_SOCKET = "/run/toolkeeper/egress.sock"
"""Where the proxy's socket is bound inside the sandbox."""
INSIDE_PORT = 3128
"""Where the forwarder listens on the sandbox's own loopback."""
MAX_CONNECTIONS = 64
"""Connections one upstream may hold open through the proxy at once."""
HEAD_TIMEOUT_S = 30.0
"""How long a request's head may take to arrive."""
_DEFAULT_PORTS = (443, 80)
_HOP = ("host", "proxy-authorization", "proxy-connection", "connection", "keep-alive")
"""Headers not forwarded: the proxy's own, and ``Host``, which is the URL's (a ``Host`` of
another name would reach that name through the allowed server's front)."""
_NAME = re.compile(r"(?=.{1,253}$)([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?\.?)+")

FORWARDER = r'''
import os, selectors, socket, sys, threading
target, port = sys.argv[1], int(sys.argv[2])
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(64)

def carry(client):
    with client, socket.socket(socket.AF_UNIX) as out:
        try:
            out.connect(target)
        except OSError:
            return
        ends, sel = {client: out, out: client}, selectors.DefaultSelector()
        for end in ends:
            sel.register(end, selectors.EVENT_READ)
        while ends:
            for key, _ in sel.select():
                try:
                    data = key.fileobj.recv(65536)
                except OSError:
                    data = b""
                if data:
                    try:
                        ends[key.fileobj].sendall(data)
                        continue
                    except OSError:
                        return
                other = ends.pop(key.fileobj)
                sel.unregister(key.fileobj)
                try:
                    other.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

if os.fork() == 0:
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=carry, args=(client,), daemon=True).start()
listener.close()
os.execvp(sys.argv[3], sys.argv[3:])
'''
"""Run inside the sandbox as ``python3 -I -S -c FORWARDER SOCKET PORT COMMAND...``: binds the
loopback port, leaves a child carrying each connection to the socket, and becomes the
server's command (which keeps its place: when it exits, the sandbox ends, forwarder too)."""


class Refused(Exception):
    """A request the list does not allow; the message names the rule and how to allow it."""


@dataclass(frozen=True)
class EgressRule:
    """One entry of ``network``: a host name (and its subdomains) or an address, on ``port``
    (``None``: 443 and 80)."""

    host: str
    port: int | None
    address: bool

    def allows(self, host: str, port: int) -> bool:
        ports = _DEFAULT_PORTS if self.port is None else (self.port,)
        if port not in ports:
            return False
        if self.address:
            return _address(host) == self.host
        return _address(host) is None and domain_allowed(host, (self.host,))

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def _address(host: str) -> str | None:
    """``host`` as a normalised IP address, or ``None`` for a name."""
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


def _split(entry: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` as (host, port)."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else (None if not rest else "x")
    elif entry.count(":") == 1:
        host, port = entry.split(":")
    else:
        host, port = entry, None
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"network entry {entry!r}: the port must be a number from 1 to 65535")
    return host, None if port is None else int(port)


def rules(entries: Sequence[str]) -> list[EgressRule]:
    """The rules of a ``network`` list.

    Raises:
        ValueError: an entry that is neither a host name nor an address (with its port).
    """
    parsed = []
    for entry in entries:
        host, port = _split(entry.strip())
        address = _address(host)
        if address is None and not _NAME.fullmatch(host):
            raise ValueError(f"network entry {entry!r} is not a host name or an IP address; "
                             "write 'host', 'host:port' or '[v6 address]:port' (a name "
                             "allows its subdomains too)")
        parsed.append(EgressRule(host=address or host.lower().rstrip("."), port=port,
                                 address=address is not None))
    return parsed


def proxy_env(port: int = INSIDE_PORT) -> dict[str, str]:
    """The variables that point a program at the forwarder: the usual ones and npm's."""
    url = f"http://127.0.0.1:{port}"
    names = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
    return {**dict.fromkeys(names, url), **{n.lower(): url for n in names},
            "npm_config_https_proxy": url, "npm_config_proxy": url, "NODE_USE_ENV_PROXY": "1",
            "NO_PROXY": "", "no_proxy": ""}


class EgressProxy:
    """The host side of one upstream's network: a filtering HTTP proxy on a unix socket."""

    def __init__(self, upstream: str, allowed: Sequence[EgressRule]) -> None:
        self.upstream = upstream
        self.allowed = tuple(allowed)
        self._dir = Path(tempfile.mkdtemp(prefix="toolkeeper-egress-"))
        self.socket = self._dir / "proxy.sock"
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        try:
            self._server = _Server(str(self.socket), _Handler)
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self._server.proxy = self
        if os.geteuid() == 0:  # the sandbox runs as an unprivileged uid: let it connect
            os.chown(self._dir, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
            os.chown(self.socket, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name=f"egress {upstream}")
        self._thread.start()

    def close(self) -> None:
        """Stop serving, cut every connection still open and remove the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._server.cut()
        self._thread.join(timeout=10)
        shutil.rmtree(self._dir, ignore_errors=True)

    def check(self, host: str, port: int) -> list[str]:
        """The addresses ``host:port`` may be reached at, resolved here once.

        Raises:
            Refused: not on the list, not resolved, or resolved to an address inside the
                network that the list does not name.
        """
        host = host.lower().rstrip(".")
        if _address(host) is None and not _NAME.fullmatch(host):  # never echoed as it came
            raise self._refuse(ascii(host), port, "it is not a host name",
                               fix="name a host (letters, digits, '-', '.') or an IP address")
        if not any(rule.allows(host, port) for rule in self.allowed):
            raise self._refuse(host, port, "it is not on the list")
        literal = _address(host)
        addresses = [literal] if literal is not None else self._resolve(host, port)
        listed = {rule.host for rule in self.allowed if rule.address}
        inside = [a for a in addresses if not public_address(a) and _address(a) not in listed]
        if inside:
            raise self._refuse(host, port, f"it resolves to {', '.join(inside)}, an address "
                               "inside the network", allow=inside[0])
        return addresses

    def _resolve(self, host: str, port: int) -> list[str]:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise self._refuse(host, port, f"it cannot be resolved ({exc})",
                               fix="check the name, or list the address it should reach"
                               ) from exc
        return list(dict.fromkeys(str(info[4][0]) for info in infos))

    def _refuse(self, host: str, port: int, why: str, *, allow: str | None = None,
                fix: str | None = None) -> Refused:
        shown = f"[{host}]" if ":" in host else host
        entry = f"{shown}:{port}" if allow is None else (f"[{allow}]" if ":" in allow else allow)
        listed = ", ".join(map(str, self.allowed)) or "nothing"
        fix = fix or (f"to allow it, add \"{entry}\" to network under [[mcp.servers]] "
                      f"name = \"{self.upstream}\"")
        message = (f"MCP server '{self.upstream}' may not reach {shown}:{port}: {why} (its "
                   f"network allows {listed}); {fix}")
        _log.warning("egress refused: %s", message)
        return Refused(message)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    proxy: EgressProxy

    def __init__(self, path: str, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(path, handler)
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()

    def handle_error(self, request: object, client_address: object) -> None:
        """A connection that broke: one line at debug level, never a traceback on stderr."""
        _log.debug("egress proxy of MCP server '%s': a connection broke", self.proxy.upstream,
                   exc_info=True)

    def cut(self) -> None:
        with self.lock:
            for sock in self.open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    """One connection from the sandbox: one request, then a tunnel or a forwarded exchange."""

    server: _Server
    rbufsize = 0  # nothing read past the head: what follows is relayed as it is
    timeout = HEAD_TIMEOUT_S
    protocol_version = "HTTP/1.1"

    slot = False

    def handle(self) -> None:
        self.slot = self.server.proxy.slots.acquire(blocking=False)
        try:
            self.handle_one_request()
        finally:
            if self.slot:
                self.server.proxy.slots.release()

    def do_CONNECT(self) -> None:
        try:
            host, port = _split(self.path)
        except ValueError:
            port = None
        if port is None:
            self._answer(400, f"CONNECT needs host:port, not {self.path!r}")
            return
        upstream = self._open(host, port)
        if upstream is not None:
            self.send_response_only(200, "Connection established")
            self.end_headers()
            self._relay(upstream)

    def _forward(self) -> None:
        url = urlsplit(self.path)
        try:
            port = url.port or 80
        except ValueError:
            port = 0
        if url.scheme != "http" or not url.hostname or not port:
            self._answer(400, f"{self.path!r}: the proxy forwards absolute http:// URLs "
                              "(https goes through CONNECT)")
            return
        upstream = self._open(url.hostname, port)
        if upstream is None:
            return
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        head = [f"{self.command} {path} HTTP/1.1", f"Host: {url.netloc.rpartition('@')[2]}"]
        head += [f"{k}: {v}" for k, v in self.headers.items() if k.lower() not in _HOP]
        head.append("Connection: close")
        upstream.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        self._relay(upstream)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _forward

    def _open(self, host: str, port: int) -> socket.socket | None:
        """A connection to ``host:port`` at an address checked, or the refusal answered."""
        if not self.slot:
            self._answer(503, f"too many connections through the proxy (at most "
                              f"{MAX_CONNECTIONS} at once)")
            return None
        try:
            addresses = self.server.proxy.check(host, port)
        except Refused as exc:
            self._answer(403, str(exc))
            return None
        for address in addresses:
            with contextlib.suppress(OSError):
                return socket.create_connection((address, port), timeout=HEAD_TIMEOUT_S)
        self._answer(502, f"{host}:{port} ({', '.join(addresses)}) did not accept a connection")
        return None

    def _answer(self, status: int, message: str) -> None:
        body = (message + "\n").encode()
        self.close_connection = True
        self.send_response_only(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _relay(self, upstream: socket.socket) -> None:
        """Bytes both ways until both ends are done (each half closed on its own)."""
        self.close_connection = True
        client = self.connection
        client.settimeout(None)
        upstream.settimeout(None)
        with self.server.lock:
            self.server.open.update((client, upstream))
        try:
            _splice(client, upstream)
        finally:
            with self.server.lock:
                self.server.open.difference_update((client, upstream))
            upstream.close()

    def log_message(self, format: str, *args: object) -> None:
        return


def _splice(a: socket.socket, b: socket.socket) -> None:
    ends = {a: b, b: a}
    with selectors.DefaultSelector() as sel:
        for end in ends:
            sel.register(end, selectors.EVENT_READ)
        while ends:
            for key, _ in sel.select():
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                other = ends[sock]
                if data:
                    try:
                        other.sendall(data)
                        continue
                    except OSError:
                        return
                del ends[sock]
                sel.unregister(sock)
                with contextlib.suppress(OSError):
                    other.shutdown(socket.SHUT_WR)
