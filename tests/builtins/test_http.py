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
from toolkeeper.builtins.http import check_url, http_tools
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
    return http_tools(SecurityPolicy(workspace=tmp_path, **policy))[0]  # type: ignore[arg-type]


def test_html_becomes_readable_text(server: str, tmp_path: Path) -> None:
    text = fetch(tmp_path, allow_loopback_http=True).run_raw({"url": f"{server}/page"})
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
    assert "Hello" in tool.run_raw({"url": f"{server}/redirect-to/{server}/page"})
    with pytest.raises(PolicyViolationError, match="not a public address"):
        tool.run_raw({"url": f"{server}/redirect-to/http://169.254.169.254/latest"})
    with pytest.raises(PolicyViolationError, match="redirects"):
        tool.run_raw({"url": f"{server}/loop"})


def test_bodies_are_capped_after_decompression(server: str, tmp_path: Path) -> None:
    tool = fetch(tmp_path, allow_loopback_http=True, max_output_bytes=100_000)
    big = tool.run_raw({"url": f"{server}/big"})
    assert "[body cut at 100000 bytes]" in big and len(big) < 101_000
    bomb = tool.run_raw({"url": f"{server}/bomb"})
    assert "[body cut at 100000 bytes]" in bomb and len(bomb) < 101_000


def test_proxy_variables_are_ignored(server: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    assert "Hello" in fetch(tmp_path, allow_loopback_http=True).run_raw({"url": f"{server}/page"})


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
