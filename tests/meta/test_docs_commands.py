"""Every command the README and docs show works when pasted in a fresh clone: each file it
names is in the repository, each install line brings every extra the commands after it need,
and the README's commands that only read run as shown, on a machine that never served."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolkeeper.cli.serve_extras import ServeAsks, needed_extras
from toolkeeper.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCKS = {"", "sh", "bash", "console", "shell"}
PATHLIKE = re.compile(r"^[\w./-]+\.(py|toml|md|cedar|json)(:\w+)?$")
# what only reads: a person may paste it on any machine, and the test runs it
READ_ONLY = (("schema",), ("check",), ("tools", "search"), ("tools", "explain"), ("tools", "list"),
             ("tools", "pins"), ("audit",), ("doctor",), ("approvals", "list"))


@dataclass(frozen=True)
class Shown:
    page: str
    line: int
    block: int
    words: list[str]

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {shlex.join(self.words)}"


def _shown() -> Iterator[Shown]:
    """Each ``toolkeeper …`` and ``pip install …`` line of a shell block (continuations joined,
    a ``$ `` prompt and ``#`` comments dropped)."""
    for page in PAGES:
        block, lang, pending, start = 0, None, "", 0
        for number, line in enumerate(page.read_text().splitlines(), start=1):
            if line.startswith("```"):
                block, lang = block + 1, None if lang is not None else line[3:].strip()
                continue
            if lang not in SHELL_BLOCKS:
                continue
            text = line.strip().removeprefix("$ ")
            if pending or text.startswith(("toolkeeper ", "pip install ")):
                start = start if pending else number
                pending += " " + text.removesuffix("\\")
                if not text.endswith("\\"):
                    yield Shown(page.name, start, block, shlex.split(pending, comments=True))
                    pending = ""


SHOWN = list(_shown())
COMMANDS = [s for s in SHOWN if s.words[0] == "toolkeeper"]


def _tracked() -> set[str]:
    """The repository's files as a fresh clone has them."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                            check=True, timeout=60)
    return set(listed.stdout.splitlines())


def test_the_docs_show_commands() -> None:
    assert len(COMMANDS) > 20 and any(s.words[:2] == ["pip", "install"] for s in SHOWN)


def test_every_file_a_documented_command_names_is_in_the_repository() -> None:
    tracked = _tracked()
    missing = [f"{shown} names {word}" for shown in COMMANDS for word in shown.words[1:]
               if PATHLIKE.match(word) and not word.startswith("/")
               and re.sub(r":\w+$", "", word).removeprefix("./") not in tracked]
    assert missing == []


def _installed_by(shown: Shown) -> set[str]:
    (spec,) = [w for w in shown.words if w.startswith("toolkeeper[")]
    return set(spec.removeprefix("toolkeeper[").removesuffix("]").split(","))


def _needs(command: Shown) -> set[str]:
    """The extras a documented command needs: the command's own, and serve's for its options."""
    words = command.words
    if words[1] != "serve":
        return {"cli"}

    def value(flag: str) -> str | None:
        return words[words.index(flag) + 1] if flag in words else None

    config = value("--config")
    asks = ServeAsks(config=ROOT / config if config else None,
                     builtins="--no-builtins" not in words, store=value("--store"),
                     oauth=bool(value("--oauth-issuer") or value("--oauth-resource")))
    return {"cli", *needed_extras(asks)}


def test_every_install_line_brings_what_the_commands_after_it_need() -> None:
    wrong = []
    for shown in SHOWN:
        if shown.words[:2] != ["pip", "install"] or not any("toolkeeper[" in w
                                                             for w in shown.words):
            continue
        extras = _installed_by(shown)
        unknown = extras - set(EXTRAS)
        if unknown:
            wrong.append(f"{shown}: no extra {sorted(unknown)}")
        for command in COMMANDS:
            if (command.page, command.block) == (shown.page, shown.block) \
                    and command.line > shown.line and not _needs(command) <= extras:
                wrong.append(f"{shown}: {command} needs {sorted(_needs(command) - extras)}")
    assert wrong == []


@pytest.mark.parametrize("shown", [s for s in COMMANDS if s.page == "README.md" and any(
    tuple(s.words[1:1 + len(r)]) == r for r in READ_ONLY)], ids=str)
def test_the_readmes_read_only_commands_run_as_shown_on_a_machine_that_never_served(
        shown: Shown, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_STATE_HOME", "TOOLKEEPER_TOKEN")}
    done = subprocess.run([sys.executable, "-m", "toolkeeper.cli", *shown.words[1:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=180,
                          env={**env, "HOME": str(tmp_path), "COLUMNS": "120"})
    assert done.returncode == 0, f"{shown}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr and "error:" not in done.stderr, done.stderr
    if shown.words[1:3] == ["tools", "search"]:
        assert "broadcast_alert" in done.stdout, done.stdout


CLIENT_TIMEOUTS = {  # a client we know → the setting docs/server.md must name for it
    "Claude Desktop": "60 s", "Cursor": "mcp.json", "VS Code": "mcp.json",
    "MCP Inspector, web UI": "MCP_SERVER_REQUEST_TIMEOUT", "MCP Inspector, CLI (`--cli`)": "requestTimeout",
    "smolagents": "client_session_timeout_seconds", "pydantic-ai": "read_timeout",
    "OpenAI Agents SDK": "client_session_timeout_seconds",
    "langchain-mcp-adapters": "sse_read_timeout",
    "the official Python client": "read_timeout_seconds",
}


def test_server_md_says_which_timeout_to_raise_in_each_client_we_know() -> None:
    text = (ROOT / "docs" / "server.md").read_text()
    section = text[text.index("## Clients that wait for a person"):]
    section = section[:section.index("\n## ", 1)]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| client")}
    for client, setting in CLIENT_TIMEOUTS.items():
        assert setting in rows.get(client, ""), f"{client}: {rows.get(client)}"
        assert len(rows[client].split("|")) == 5, rows[client]  # what to expect, said too
