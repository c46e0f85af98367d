"""Every Python block of README.md and docs/ (every .md file under it) runs as written.

The blocks of one page run in order in one namespace (a later block may use what an earlier one
defined, as a reader going down the page would), as a module is imported (so the lines under
``if __name__ == "__main__":`` — a server that serves until its client goes — do not run), in a
fresh working directory holding the files a page says it has (``PAGE_FILES``), with ``python3``
the interpreter running the tests and the provider SDKs' clients replaced by fakes built from
their own types (``doc_clients``). A block may use
top-level ``await`` (as in ``python -m asyncio`` or a notebook); the page keeps one event loop
for those. A block that cannot run here is preceded by ``<!-- run: skip-reason WHY -->``; the
reasons are listed by ``test_every_skipped_block_says_why``.

A failure names the page and the line in it: the block is compiled with the page's own line
numbers, so the traceback points into the Markdown file.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import shutil
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import doc_clients

ROOT = Path(__file__).resolve().parents[2]
PAGE_FILES = {"docs/mcp.md": {"notes_server.py": ROOT / "tests/gateway/upstream_server.py"}}
"""Files a page's example says are there (mcp.md's gateway starts ``notes_server.py``)."""
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^(?:<!-- run: (?P<marker>[^\n]*?) -->\n)?```python\n(?P<code>.*?)^```",
                   re.S | re.M)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the first line of code
    code: str
    marker: str | None

    @property
    def where(self) -> str:
        return f"{shown(self.page)}:{self.line}"


def shown(page: Path) -> str:
    """A page as a failure names it: from the project root when it lies there."""
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in BLOCK.finditer(text):
        line = text.count("\n", 0, match.start("code")) + 1
        found.append(Block(page, line, match.group("code"), match.group("marker")))
    return found


def run_page(page: Path) -> None:
    namespace: dict[str, object] = {"__name__": "docs_example"}
    loop = asyncio.new_event_loop()
    try:
        for block in blocks(page):
            if block.marker is not None:
                if not block.marker.startswith("skip-reason "):
                    pytest.fail(f"{block.where}: unknown marker <!-- run: {block.marker} -->; "
                                "use <!-- run: skip-reason WHY -->")
                continue
            run_block(block, namespace, loop)
    finally:
        loop.close()


def run_block(block: Block, namespace: dict[str, object], loop: asyncio.AbstractEventLoop
              ) -> None:
    source = "\n" * (block.line - 1) + block.code  # the page's own line numbers
    try:
        code = compile(source, str(block.page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        outcome = eval(code, namespace)  # the docs' own code
        if inspect.iscoroutine(outcome):
            loop.run_until_complete(outcome)
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        line = next((f.lineno for f in reversed(frames) if f.filename == str(block.page)),
                    block.line)
        pytest.fail(f"{shown(block.page)}:{line}: the block starting at line "
                    f"{block.line} fails: {type(exc).__name__}: {exc}\n"
                    + "".join(traceback.format_exception(exc)), pytrace=False)


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for name, source in PAGE_FILES.get(str(page.relative_to(ROOT)), {}).items():
        shutil.copy(source, work / name)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    monkeypatch.chdir(work)
    doc_clients.install(monkeypatch)
    run_page(page)


def test_every_skipped_block_says_why() -> None:
    skipped = [(b.where, b.marker) for p in PAGES for b in blocks(p) if b.marker is not None]
    for where, marker in skipped:
        assert marker is not None and marker.startswith("skip-reason ") and len(marker) > 24, (
            f"{where}: say why the block cannot run: <!-- run: skip-reason WHY -->")
    assert len(skipped) <= 3, f"blocks that do not run: {skipped}"


def test_a_failing_block_is_reported_with_its_page_and_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```python\nx = 1\n\nraise ValueError('boom')\n```\n")
    with pytest.raises(pytest.fail.Exception,
                       match=r"page\.md:6: the block starting at line 4 fails: ValueError: boom"):
        run_page(page)


def test_a_block_after_a_skip_marker_does_not_run_and_an_unknown_marker_fails(
        tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- run: skip-reason it needs a GPU that tests do not have -->\n"
                    "```python\nraise SystemExit('ran')\n```\n")
    run_page(page)
    page.write_text("<!-- run: maybe -->\n```python\nx = 1\n```\n")
    with pytest.raises(pytest.fail.Exception, match=r"page\.md:3: unknown marker"):
        run_page(page)
