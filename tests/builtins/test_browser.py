"""``browser`` / ``browser_open`` as the config gates them (``[browser] enabled``,
``allowed_domains``), driving the system's Chromium headless against pages served on loopback,
with ``allowed.test`` and ``evil.test`` pinned there: the allowlist holds for the page, its
redirects and its subresources, and nothing the page tries reaches a host by another way."""

from __future__ import annotations

import base64
import importlib.util
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from toolkeeper import AutoApprovalHandler, ToolCall, ToolInvoker
from toolkeeper.builtins import browser
from toolkeeper.config import all_tools_with_runtime, explain, load_config

CHROMIUM = Path("/usr/bin/chromium")
WEBRTC = r"""<title>WebRTC</title><h1>Trying UDP</h1>
<script>
const udp = new URLSearchParams(location.search).get("udp");
const report = text => { const p = document.createElement("p"); p.id = "done";
                         p.textContent = text; document.body.appendChild(p); };
async function quic() {
  if (!window.WebTransport) return "no WebTransport";
  const link = new WebTransport(`https://127.0.0.1:${udp}/`);
  return link.ready.then(() => "WebTransport open", () => "WebTransport refused");
}
async function attempt() {
  let Peer = window.RTCPeerConnection;
  if (!Peer) {  // a fresh frame's own copy
    const frame = document.createElement("iframe");
    document.body.appendChild(frame);
    Peer = frame.contentWindow.RTCPeerConnection;
  }
  if (!Peer) return "no RTCPeerConnection; " + await quic();
  const pc = new Peer({iceServers: [
    {urls: [`stun:127.0.0.1:${udp}`, "stun:169.254.169.254:3478"]},
    {urls: `turn:127.0.0.1:${udp}?transport=udp`, username: "u", credential: "p"}]});
  pc.createDataChannel("probe");
  const found = [];
  pc.onicecandidate = e => { if (e.candidate && e.candidate.candidate) found.push(e.candidate); };
  const gathered = new Promise(done => { pc.onicegatheringstatechange = () => {
    if (pc.iceGatheringState === "complete") done("complete"); }; });
  await pc.setLocalDescription(await pc.createOffer());
  // a peer that says it is at 127.0.0.1:udp: every local candidate would check it
  const answer = pc.localDescription.sdp.replace("a=setup:actpass", "a=setup:active")
    .replace(/a=ice-ufrag:.*\r\n/, "a=ice-ufrag:peer\r\n")
    .replace(/a=ice-pwd:.*\r\n/, "a=ice-pwd:abcdefghijklmnopqrstuvwx\r\n")
    .replace(/a=candidate:.*\r\n/g, "").replace(/a=end-of-candidates\r\n/g, "");
  await pc.setRemoteDescription({type: "answer", sdp: answer});
  await pc.addIceCandidate({candidate: `candidate:1 1 udp 2122260223 127.0.0.1 ${udp} typ host`,
                           sdpMid: "0", sdpMLineIndex: 0});
  const state = await Promise.race([gathered, new Promise(
    done => setTimeout(() => done("still running after 5 s"), 5000))]);
  return `gathering ${state}, ${found.length} candidate(s); ` + await quic();
}
attempt().then(report, e => report("error: " + e));
</script>"""


class Site(BaseHTTPRequestHandler):
    asked: ClassVar[list[tuple[str, str]]] = []

    def log_message(self, *args: object) -> None:
        return

    def do_GET(self) -> None:
        host = self.headers["Host"].split(":")[0]
        Site.asked.append((host, self.path))
        port = self.server.server_address[1]  # type: ignore[index]  # a TCP server's (host, port)
        if self.path.startswith("/go/"):
            self.send_response(302)
            self.send_header("Location", self.path[len("/go/"):].replace("PORT", str(port)))
            self.end_headers()
            return
        pages = {
            "/page": f'<title>Allowed</title><h1>Hello from {host}</h1>'
                     f'<img src="http://evil.test:{port}/pixel.png">',
            "/form": '<title>Form</title><form action="/sent"><input id="q" name="q">'
                     '<button id="go">Go</button></form>',
            "/escape": f"""<title>Escape</title><h1>Trying</h1>
<iframe src="http://evil.test:{port}/frame"></iframe>
<script>
const tries = [
  fetch("http://127.0.0.1:{port}/direct").then(() => "fetched", () => "refused"),
  new Promise(done => {{ const ws = new WebSocket("ws://127.0.0.1:{port}/ws");
                         ws.onopen = () => done("open"); ws.onerror = () => done("refused"); }}),
];
Promise.all(tries).then(r => {{ const p = document.createElement("p"); p.id = "done";
                                 p.textContent = "results: " + r.join(", ");
                                 document.body.appendChild(p); }});
</script>""",
            "/webrtc": WEBRTC,
        }
        body = pages.get(self.path.split("?")[0], f"<title>Other</title><p>{self.path}</p>")
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    if not CHROMIUM.is_file():
        pytest.fail("the browser tests drive Debian's chromium: apt install chromium")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


BROWSER_CONFIG = """\
[security]
workspace = "ws"
autonomy = "{autonomy}"

[browser]
enabled = true
allowed_domains = ["allowed.test"]
hosts = {{ "allowed.test" = "127.0.0.1", "evil.test" = "127.0.0.1" }}
allow_loopback = true
"""


def config(tmp_path: Path, autonomy: str = "supervised", text: str = BROWSER_CONFIG) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    path = tmp_path / "toolkeeper.toml"
    path.write_text(text.format(autonomy=autonomy))
    return path


async def call(tmp_path: Path, name: str, **arguments: Any) -> Any:
    invoker = ToolInvoker(all_tools_with_runtime(load_config(config(tmp_path))),
                          AutoApprovalHandler())
    return await invoker.invoke(ToolCall(id="b1", name=name, arguments=arguments),
                                session=invoker.open_session())


async def test_an_allowed_page_opens_with_its_text_and_a_screenshot(
        tmp_path: Path, port: int) -> None:
    Site.asked.clear()
    result = await call(tmp_path, "browser_open", url=f"http://allowed.test:{port}/page")
    assert result.status == "ok", result.text
    text, image = result.result.content
    assert text.text.startswith(f"Allowed — http://allowed.test:{port}/page\n\nHello from "
                                "allowed.test")
    assert (image.type, image.media_type) == ("image", "image/png")
    assert base64.b64decode(image.data).startswith(b"\x89PNG\r\n\x1a\n")
    assert f"- http://evil.test:{port}/pixel.png: 'evil.test' is not in " \
           "browser.allowed_domains (allowed.test)" in text.text
    assert Site.asked == [("allowed.test", "/page")]  # the subresource never left


async def test_a_redirect_to_a_disallowed_host_is_refused(tmp_path: Path, port: int) -> None:
    Site.asked.clear()
    result = await call(tmp_path, "browser_open",
                        url=f"http://allowed.test:{port}/go/http://evil.test:PORT/landing")
    assert result.error_code == "policy_violation"
    assert "'evil.test' is not in browser.allowed_domains (allowed.test)" in result.text
    assert Site.asked == [("allowed.test", "/go/http://evil.test:PORT/landing")]


async def test_a_redirect_inside_the_allowlist_lands_where_it_points(
        tmp_path: Path, port: int) -> None:
    result = await call(tmp_path, "browser_open", url=f"http://allowed.test:{port}/go//landing")
    assert result.status == "ok", result.text
    assert result.text.startswith(f"Other — http://allowed.test:{port}/landing\n\n/landing")


async def test_nothing_the_page_tries_reaches_a_host_another_way(
        tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fetch to an address literal, a WebSocket (which request interception does not see)
    and a frame on a disallowed host: none of them reaches the server. Chromium's own local
    network checks are switched off, so what stops the WebSocket is toolkeeper's confinement."""
    monkeypatch.setattr(browser, "BROWSER_ARGS",
                        (*browser.BROWSER_ARGS, "--disable-features=LocalNetworkAccessChecks"))
    Site.asked.clear()
    result = await call(tmp_path, "browser", url=f"http://allowed.test:{port}/escape",
                        actions=[{"action": "wait_for", "selector": "#done"}], screenshot=False)
    assert result.status == "ok", result.text
    assert "results: refused, refused" in result.text
    assert Site.asked == [("allowed.test", "/escape")]
    assert f"- http://evil.test:{port}/frame:" in result.text
    assert f"- http://127.0.0.1:{port}/direct: '127.0.0.1' is not in browser.allowed_domains" \
        in result.text


@pytest.fixture
def udp() -> Iterator[socket.socket]:
    """A UDP port on loopback that a page will aim STUN, TURN, ICE checks and QUIC at."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        yield sock


def _arrived(sock: socket.socket) -> list[tuple[Any, bytes]]:
    """The datagrams waiting on ``sock``: on loopback a datagram is queued when it is sent, and
    everything the browser sent was sent before the call returned (the browser is closed)."""
    found: list[tuple[Any, bytes]] = []
    while True:
        try:
            data, sender = sock.recvfrom(65536)
        except BlockingIOError:
            return found
        found.append((sender, data[:24]))


async def test_webrtc_is_gone_from_every_frame_and_sends_nothing(
        tmp_path: Path, port: int, udp: socket.socket) -> None:
    """WebRTC's UDP is outside request interception: a page asked a STUN server on loopback
    (and at the metadata address) and checked a made-up peer there, and the datagrams arrived.
    Now the page finds no RTCPeerConnection, in its window or in a fresh frame's."""
    result = await call(tmp_path, "browser",
                        url=f"http://allowed.test:{port}/webrtc?udp={udp.getsockname()[1]}",
                        actions=[{"action": "wait_for", "selector": "#done"}], screenshot=False)
    assert result.status == "ok", result.text
    assert _arrived(udp) == []
    assert "no RTCPeerConnection; no WebTransport" in result.text


async def test_a_frame_that_kept_webrtc_still_sends_no_udp(
        tmp_path: Path, port: int, udp: socket.socket,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The second layer on its own, as if a frame escaped the script that removes WebRTC:
    Chromium sends WebRTC only through the proxy, which does not exist, so ICE gathers nothing
    and checks no peer. The page is a secure context here (WebTransport's QUIC is UDP too) and
    Chromium's own local network checks are off: what stops the datagrams is toolkeeper's."""
    monkeypatch.setattr(browser, "NO_WEBRTC", "", raising=False)
    monkeypatch.setattr(browser, "BROWSER_ARGS", (
        *browser.BROWSER_ARGS, "--disable-features=LocalNetworkAccessChecks",
        f"--unsafely-treat-insecure-origin-as-secure=http://allowed.test:{port}"))
    result = await call(tmp_path, "browser",
                        url=f"http://allowed.test:{port}/webrtc?udp={udp.getsockname()[1]}",
                        actions=[{"action": "wait_for", "selector": "#done"}], screenshot=False)
    assert result.status == "ok", result.text
    assert _arrived(udp) == []
    assert "gathering complete, 0 candidate(s); WebTransport refused" in result.text


async def test_browser_acts_on_the_page(tmp_path: Path, port: int) -> None:
    result = await call(tmp_path, "browser", url=f"http://allowed.test:{port}/form",
                        actions=[{"action": "fill", "selector": "#q", "text": "cats"},
                                 {"action": "click", "selector": "#go"}])
    assert result.status == "ok", result.text
    assert result.text.startswith(f"Other — http://allowed.test:{port}/sent?q=cats")
    assert [b.type for b in result.result.content] == ["text", "image"]


async def test_a_url_that_is_not_http_is_refused_before_a_browser_starts(
        tmp_path: Path, port: int) -> None:
    result = await call(tmp_path, "browser_open", url="file:///etc/passwd")
    assert result.error_code == "policy_violation" and "scheme 'file' is refused" in result.text


def test_read_only_autonomy_keeps_browser_open_and_leaves_out_browser(tmp_path: Path) -> None:
    names = {t.name for t in all_tools_with_runtime(load_config(config(tmp_path, "read_only")))}
    assert "browser_open" in names and "browser" not in names


def test_what_the_browser_needs_is_explained(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def reason(text: str) -> str:
        decision = {d.tool: d for d in explain(load_config(config(tmp_path, text=text)))}
        assert decision["browser"].cause == decision["browser_open"].cause == "unavailable"
        return decision["browser_open"].reason

    no_domains = BROWSER_CONFIG.replace('allowed_domains = ["allowed.test"]', "")
    assert reason(no_domains).startswith("enabled, but browser.allowed_domains is empty")
    elsewhere = BROWSER_CONFIG + 'executable_path = "/nowhere/chromium"\n'
    assert reason(elsewhere) == ("enabled, but no Chromium at /nowhere/chromium; install it "
                                 "(Debian: apt install chromium) or set browser.executable_path")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "playwright" else real(name, *a))
    assert reason(BROWSER_CONFIG) == ("enabled, but needs Playwright, the browser extra: "
                                  "pip install 'toolkeeper[browser]'")
