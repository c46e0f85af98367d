"""``text_browser`` (``[text_browser] enabled = true``) against real servers on loopback: readable
text with numbered links, and the fetch tool's address rules — loopback refused unless allowed,
the domain allowlist, every redirect checked again."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from toolkeeper import ToolCall, ToolInvoker
from toolkeeper.builtins.policy import SecurityPolicy
from toolkeeper.builtins.text_browser import text_browser_tool
from toolkeeper.config import all_tools_with_runtime, load_config

PAGE = b"""<!doctype html><html><head><title>Docs</title><style>p{color:red}</style></head>
<body><h1>Guide</h1><p>Read the <a href="/install">install notes</a> first, then
<a href="https://example.org/faq#top">the FAQ</a>.</p>
<script>document.write("injected")</script>
<p><a href="javascript:alert(1)">a script link</a> and <a href="mailto:x@example.org">mail</a>
and <a href="../install">the install notes again</a>.</p></body></html>"""


class Site(BaseHTTPRequestHandler):
    hosts: ClassVar[list[str]] = []

    def log_message(self, *args: object) -> None:
        return

    def do_GET(self) -> None:
        Site.hosts.append(self.headers["Host"].split(":")[0])
        if self.path.startswith("/go/"):
            self.send_response(302)
            self.send_header("Location", self.path[len("/go/"):])
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


async def open_page(policy: SecurityPolicy, url: str) -> Any:
    invoker = ToolInvoker([text_browser_tool(policy)])
    call = ToolCall(id="t1", name="text_browser", arguments={"url": url})
    return await invoker.invoke(call, session=invoker.open_session())


def local(tmp_path: Path, **rules: Any) -> SecurityPolicy:
    return SecurityPolicy(workspace=tmp_path, allow_loopback_http=True,
                          hosts={"docs.test": "127.0.0.1", "other.test": "127.0.0.1"}, **rules)


async def test_a_page_reads_as_text_with_its_links_numbered(tmp_path: Path, port: int) -> None:
    result = await open_page(local(tmp_path), f"http://docs.test:{port}/guide/")
    assert result.status == "ok", result.text
    head, _, rest = result.text.partition("\n\n")
    text, _, links = rest.partition("\n\nLinks:\n")
    assert head == f"[200] http://docs.test:{port}/guide/"
    assert "Read the install notes [1] first, then the FAQ [2]." in " ".join(text.split())
    assert "a script link and mail and the install notes again [1]." in " ".join(text.split())
    assert "injected" not in result.text and "color:red" not in result.text
    assert links == f"[1] http://docs.test:{port}/install\n[2] https://example.org/faq"


async def test_loopback_is_refused_by_default(tmp_path: Path, port: int) -> None:
    result = await open_page(SecurityPolicy(workspace=tmp_path), f"http://127.0.0.1:{port}/")
    assert result.error_code == "policy_violation" and "not a public address" in result.text


async def test_a_redirect_off_the_allowlist_is_refused_before_it_is_followed(
        tmp_path: Path, port: int) -> None:
    Site.hosts.clear()
    policy = local(tmp_path, allowed_domains=("docs.test",))
    result = await open_page(policy, f"http://docs.test:{port}/go/http://other.test:{port}/x")
    assert result.error_code == "policy_violation"
    assert "'other.test' is not in security.allowed_domains (docs.test)" in result.text
    assert Site.hosts == ["docs.test"]  # the other host was never asked


async def test_the_section_enables_it_with_its_own_domains(tmp_path: Path, port: int) -> None:
    (tmp_path / "ws").mkdir()
    config = tmp_path / "toolkeeper.toml"
    config.write_text('[security]\nworkspace = "ws"\n\n[text_browser]\nenabled = true\n'
                      'allowed_domains = ["docs.example.com"]\n')
    tools = {t.name: t for t in all_tools_with_runtime(load_config(config))}
    invoker = ToolInvoker(list(tools.values()))
    call = ToolCall(id="t2", name="text_browser", arguments={"url": "https://example.org/"})
    result = await invoker.invoke(call, session=invoker.open_session())
    assert result.error_code == "policy_violation"
    assert "'example.org' is not in text_browser.allowed_domains (docs.example.com)" in result.text
    config.write_text('[security]\nworkspace = "ws"\n')
    assert "text_browser" not in {t.name for t in all_tools_with_runtime(load_config(config))}
