"""``web_search_tool`` as the config gates it (``[web_search] enabled``, ``provider = "brave"``, the
key from the config or ``BRAVE_API_KEY``), against a local server answering with the Brave
Search API's own response shape."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest
from typer.testing import CliRunner

from toolkeeper import ToolCall, ToolInvoker
from toolkeeper.cli.main import app
from toolkeeper.config import all_tools_with_runtime, explain, load_config

BRAVE_ANSWER: dict[str, Any] = {  # trimmed from a real /res/v1/web/search answer
    "type": "search",
    "query": {"original": "python tomllib", "more_results_available": True},
    "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": False}]},
    "web": {
        "type": "search",
        "family_friendly": True,
        "results": [
            {"title": "<strong>tomllib</strong> — Parse TOML files — Python 3.13 documentation",
             "url": "https://docs.python.org/3/library/tomllib.html", "is_source_local": False,
             "is_source_both": False, "description": "This module provides an interface for "
             "parsing TOML 1.0.0 (Tom&#x27;s Obvious Minimal Language, <strong>https</strong>"
             "://toml.io/en/v1.0.0).", "page_age": "2024-10-07T00:00:00", "language": "en",
             "family_friendly": True, "type": "search_result", "subtype": "generic",
             "meta_url": {"scheme": "https", "netloc": "docs.python.org",
                          "hostname": "docs.python.org", "path": "› 3 › library"},
             "age": "October 7, 2024"},
            {"title": "PEP 680 – tomllib: Support for Parsing TOML in the Standard Library",
             "url": "https://peps.python.org/pep-0680/", "description": "This PEP proposes "
             "adding the <strong>tomllib</strong> module to the standard library.",
             "type": "search_result", "subtype": "generic", "language": "en",
             "profile": {"name": "Python", "url": "https://peps.python.org/pep-0680/"}},
        ],
    },
}


class Brave(BaseHTTPRequestHandler):
    requests: ClassVar[list[tuple[str, dict[str, list[str]], str | None]]] = []

    def log_message(self, *args: object) -> None:
        return

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        token = self.headers.get("X-Subscription-Token")
        Brave.requests.append((url.path, parse_qs(url.query), token))
        if token not in ("brave-key", "env-key"):
            body, status = b'{"type":"ErrorResponse","error":{"code":"SUBSCRIPTION_TOKEN_INVALID",' \
                           b'"detail":"The provided subscription token is invalid.","status":401}}', 401
        else:
            body, status = json.dumps(BRAVE_ANSWER).encode(), 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def brave() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Brave)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/res/v1"
    httpd.shutdown()


def config_file(tmp_path: Path, brave: str, key: str | None) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    path = tmp_path / "toolkeeper.toml"
    path.write_text('[security]\nworkspace = "ws"\n\n[web_search]\nenabled = true\n'
                    f'provider = "brave"\nbase_url = "{brave}"\n'
                    + (f'api_key = "{key}"\n' if key else ""))
    return path


async def search(path: Path, **arguments: Any) -> Any:
    invoker = ToolInvoker(all_tools_with_runtime(load_config(path)))
    call = ToolCall(id="s1", name="web_search_tool", arguments=arguments)
    return await invoker.invoke(call, session=invoker.open_session())


async def test_results_come_back_numbered_as_plain_text(tmp_path: Path, brave: str) -> None:
    Brave.requests.clear()
    result = await search(config_file(tmp_path, brave, "brave-key"), query="python tomllib",
                          count=2)
    assert result.status == "ok", result.text
    assert result.text == (
        "1. tomllib — Parse TOML files — Python 3.13 documentation\n"
        "   https://docs.python.org/3/library/tomllib.html\n"
        "   This module provides an interface for parsing TOML 1.0.0 (Tom's Obvious Minimal "
        "Language, https://toml.io/en/v1.0.0).\n\n"
        "2. PEP 680 – tomllib: Support for Parsing TOML in the Standard Library\n"
        "   https://peps.python.org/pep-0680/\n"
        "   This PEP proposes adding the tomllib module to the standard library.")
    path, query, token = Brave.requests[-1]
    assert path == "/res/v1/web/search" and query == {"q": ["python tomllib"], "count": ["2"]}
    assert token == "brave-key"


async def test_the_key_may_come_from_brave_api_key(
        tmp_path: Path, brave: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAVE_API_KEY", "env-key")
    Brave.requests.clear()
    result = await search(config_file(tmp_path, brave, None), query="tomllib")
    assert result.status == "ok" and Brave.requests[-1][2] == "env-key"


def test_enabled_without_a_key_is_skipped_with_a_warning(
        tmp_path: Path, brave: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    path = config_file(tmp_path, brave, None)
    decision = {d.tool: d for d in explain(load_config(path))}["web_search_tool"]
    assert (decision.included, decision.cause) == (False, "missing_credentials")
    assert decision.reason == ("enabled, but needs web_search.api_key in the config or the "
                               "BRAVE_API_KEY environment variable")
    with caplog.at_level(logging.WARNING, logger="toolkeeper.config"):
        names = {t.name for t in all_tools_with_runtime(load_config(path))}
    assert "web_search_tool" not in names
    assert any("web_search_tool left out" in r.getMessage() for r in caplog.records)
    shown = CliRunner().invoke(app, ["tools", "explain", "--config", str(path)],
                               env={"COLUMNS": "300", "BRAVE_API_KEY": ""})
    row = next(line for line in shown.stdout.splitlines() if "web_search_tool" in line)
    assert "excluded" in row and "BRAVE_API_KEY" in row


async def test_a_refused_key_is_an_error_that_does_not_show_the_key(
        tmp_path: Path, brave: str) -> None:
    result = await search(config_file(tmp_path, brave, "wrong-key"), query="tomllib")
    assert result.status == "error" and "answered 401" in result.text
    assert "wrong-key" not in result.text
    tools = {t.name: t for t in all_tools_with_runtime(
        load_config(config_file(tmp_path, brave, "wrong-key")))}
    assert "wrong-key" not in json.dumps(tools["web_search_tool"].get_schema("openai-chat"))


def test_only_brave_is_a_provider(tmp_path: Path) -> None:
    from toolkeeper import ConfigError

    path = tmp_path / "toolkeeper.toml"
    path.write_text('[web_search]\nenabled = true\nprovider = "bing"\n')
    with pytest.raises(ConfigError, match=r"toolkeeper.toml:3: web_search.provider"):
        load_config(path)
