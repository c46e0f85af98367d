"""http tools against real servers on loopback: SSRF rules, redirects, caps, readable HTML."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from toolkeeper import PolicyViolationError, Tool
from toolkeeper.builtins.http import check_url, http_tools, public_address
from toolkeeper.builtins.policy import SecurityPolicy


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return

    def do_GET(self) -> None:
        routes = {
            "/page": (200, "text/html", b"<html><body><h1>Title</h1><p>Hello <b>web</b></p>"
                                        b"<script>evil()</script></body></html>"),
            "/big": (200, "text/plain", b"x" * 300_000),
            "/bomb": (200, "text/plain", gzip.compress(b"y" * 5_000_000)),
        }
        if self.path.startswith("/redirect-to/"):
            self.send_response(302)
            self.send_header("Location", self.path[len("/redirect-to/"):])
            self.end_headers()
            return
        if self.path == "/dribble":  # a status line and headers a byte at a time, forever
            try:
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100_000:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                return
            return
        if self.path == "/loop":
            self.send_response(302)
            self.send_header("Location", "/loop")
            self.end_headers()
            return
        status, kind, body = routes.get(self.path, (404, "text/plain", b"missing"))
        self.send_response(status)
        self.send_header("Content-Type", kind)
        if self.path == "/bomb":
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def fetch(tmp_path: Path, **policy: object) -> Tool:
    return http_tools(SecurityPolicy(workspace=tmp_path, **policy))[0]


def test_html_becomes_readable_text(server: str, tmp_path: Path) -> None:
    text = str(fetch(tmp_path, allow_loopback_http=True).run_raw({"url": f"{server}/page"}))
    assert "# Title" in text and "Hello **web**" in text and "<html>" not in text


def test_loopback_is_refused_unless_explicitly_allowed(server: str, tmp_path: Path) -> None:
    with pytest.raises(PolicyViolationError, match="not a public address"):
        fetch(tmp_path).run_raw({"url": f"{server}/page"})


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://192.168.1.1/",
    "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/", "http://[fd00::1]/",
    "http://2130706433/", "http://0x7f.1/", "http://localhost/", "http://100.64.0.1/",
])
def test_addresses_inside_the_network_are_refused_however_written(url: str, tmp_path: Path) -> None:
    with pytest.raises(PolicyViolationError):
        check_url(url, SecurityPolicy(workspace=tmp_path))


@pytest.mark.parametrize(("address", "public"), [
    ("8.8.8.8", True), ("2606:4700::1111", True), ("2001:4860:4860::8888", True),
    ("::ffff:8.8.8.8", True), ("64:ff9b::8.8.8.8", True), ("2002:808:808::1", True),
    ("::ffff:127.0.0.1", False), ("::ffff:169.254.169.254", False),
    ("64:ff9b::127.0.0.1", False), ("64:ff9b::169.254.169.254", False),
    ("64:ff9b::10.0.0.1", False),  # NAT64 (well-known prefix): judged by the IPv4 it carries
    ("64:ff9b:1::a9fe:a9fe", False), ("64:ff9b:1:ffff::8.8.8.8", False),  # local-use NAT64
    ("::127.0.0.1", False), ("::169.254.169.254", False), ("::8.8.8.8", False),  # compatible
    ("::ffff:0:127.0.0.1", False), ("::ffff:0:8.8.8.8", False),  # IPv4-translated
    ("2002:7f00:1::1", False), ("2002:a9fe:a9fe::", False), ("2002:c0a8:101::1", False),  # 6to4
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", False),  # Teredo
    ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", False),  # Teredo, whatever it carries
    ("::1", False), ("::", False), ("fe80::1%eth0", False), ("fd00::1", False),
    ("ff0e::1", False), ("224.0.0.1", False), ("100.64.0.1", False),
])
def test_the_address_rule_judges_ipv4_inside_ipv6_by_what_it_reaches(
        address: str, public: bool) -> None:
    """An IPv6 address that carries an IPv4 one reaches that IPv4 host (a translator or tunnel
    takes it there): NAT64, 6to4 and IPv4-mapped forms are judged by the IPv4 address; the
    forms a tunnel or translator inside the network takes anywhere are refused outright."""
    assert public_address(address) is public


@pytest.mark.parametrize("address", ["64:ff9b::a9fe:a9fe", "::7f00:1", "2002:7f00:1::1"])
def test_a_name_pinned_to_ipv4_inside_ipv6_is_refused_by_http_fetch(
        address: str, tmp_path: Path) -> None:
    tool = fetch(tmp_path, hosts={"metadata.test": address})
    with pytest.raises(PolicyViolationError, match=f"'metadata.test' resolves to {address}, "
                                                    "which is not a public address") as refused:
        tool.run_raw({"url": "http://metadata.test/latest/meta-data/"})
    assert refused.value.details["rule"] == "http.non_global_address"


@pytest.mark.parametrize(("url", "rule"), [
    ("file:///etc/passwd", "scheme"), ("ftp://example.com/", "scheme"),
    ("gopher://127.0.0.1:70/", "scheme"), ("http://user:pw@example.com/", "credentials"),
])
def test_other_schemes_and_credentials_are_refused(url: str, rule: str, tmp_path: Path) -> None:
    with pytest.raises(PolicyViolationError, match=rule):
        check_url(url, SecurityPolicy(workspace=tmp_path))


def test_domain_allowlist_matches_on_label_boundaries(tmp_path: Path) -> None:
    policy = SecurityPolicy(workspace=tmp_path, allowed_domains=("example.com",))
    for bad in ("http://evilexample.com/", "http://example.com.evil.net/"):
        with pytest.raises(PolicyViolationError, match="allowed_domains"):
            check_url(bad, policy)


def test_redirects_are_validated_again(server: str, tmp_path: Path) -> None:
    tool = fetch(tmp_path, allow_loopback_http=True)
    assert "Hello" in str(tool.run_raw({"url": f"{server}/redirect-to/{server}/page"}))
    with pytest.raises(PolicyViolationError, match="not a public address"):
        tool.run_raw({"url": f"{server}/redirect-to/http://169.254.169.254/latest"})
    with pytest.raises(PolicyViolationError, match="redirects"):
        tool.run_raw({"url": f"{server}/loop"})


def test_bodies_are_capped_after_decompression(server: str, tmp_path: Path) -> None:
    tool = fetch(tmp_path, allow_loopback_http=True, max_output_bytes=100_000)
    big = str(tool.run_raw({"url": f"{server}/big"}))
    assert "[body cut at 100000 bytes]" in big and len(big) < 101_000
    bomb = str(tool.run_raw({"url": f"{server}/bomb"}))
    assert "[body cut at 100000 bytes]" in bomb and len(bomb) < 101_000


def test_proxy_variables_are_ignored(server: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    assert "Hello" in str(fetch(tmp_path, allow_loopback_http=True).run_raw({"url": f"{server}/page"}))


def test_one_deadline_covers_the_whole_exchange(server: str, tmp_path: Path) -> None:
    """Headers dribbled a byte at a time restart a per-read timeout forever; the call's one
    absolute deadline stops it (before the fix it ran until the server gave up)."""
    from toolkeeper import ToolRaisedError

    tool = http_tools(SecurityPolicy(workspace=tmp_path, allow_loopback_http=True),
                      timeout_s=1.0)[0]
    outcome: list[BaseException | object] = []

    def call() -> None:
        try:
            outcome.append(tool.run_raw({"url": f"{server}/dribble"}))
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(timeout=60)
    assert not caller.is_alive(), "the call outlived its deadline"
    assert isinstance(outcome[0], ToolRaisedError)
    assert "took longer than the 1 s time limit" in str(outcome[0])
