"""The MCP wire is read in one place: the era of a request by one helper, the JSON-RPC codes
from the SDK's constants, the SDK imported at module level wherever the face uses it."""

from __future__ import annotations

import ast
import os
import random
import re
from pathlib import Path
from types import SimpleNamespace

import anyio
import mcp_types
import pytest

from toolkeeper import Toolbox, ToolInvoker, tool
from toolkeeper.mcp import wire
from toolkeeper.mcp.server import MCPFace

SRC = Path(__file__).resolve().parents[2] / "src" / "toolkeeper"
SDK_FACING = ["mcp", "server", "gateway"]
CODE = re.compile(r"-32[0-9]{3}\b")
DEFINED = {SRC / "mcp" / "wire.py",  # the SDK's codes, named once
           SRC / "gateway" / "sources.py"}  # the one the SDK has no name for (the gateway
#                                             loads without the SDK)


def _sources(rooms: list[str]) -> list[Path]:
    return [path for room in rooms for path in sorted((SRC / room).rglob("*.py"))]


@pytest.mark.parametrize(("version", "expected"), [
    ("2024-11-05", False), ("2025-11-25", False), ("2026-07-28", True), ("", False),
    ("zzz", False)])
def test_the_era_of_a_request_is_the_sdks_order_of_revisions(version: str,
                                                              expected: bool) -> None:
    assert wire.modern(SimpleNamespace(protocol_version=version)) is expected


def test_the_codes_are_the_sdks_own() -> None:
    assert (wire.PARSE_ERROR, wire.INVALID_REQUEST, wire.INVALID_PARAMS, wire.INTERNAL_ERROR,
            wire.MISSING_CAPABILITY) == (mcp_types.PARSE_ERROR, mcp_types.INVALID_REQUEST,
                                         mcp_types.INVALID_PARAMS, mcp_types.INTERNAL_ERROR,
                                         mcp_types.MISSING_REQUIRED_CLIENT_CAPABILITY)


def test_no_era_is_guessed_from_a_string_and_no_code_is_written_twice() -> None:
    guessed, written = [], []
    for path in _sources(SDK_FACING):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == "2026":
                guessed.append(f"{path.relative_to(SRC)}:{node.lineno}")
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
                    and isinstance(node.operand, ast.Constant) \
                    and isinstance(node.operand.value, int) \
                    and CODE.fullmatch(f"-{node.operand.value}") \
                    and path not in DEFINED:
                written.append(f"{path.relative_to(SRC)}:{node.lineno}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and CODE.fullmatch(node.value):
                written.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert guessed == [], "the era is wire.modern(ctx)"
    assert written == [], "a JSON-RPC code is a constant of toolkeeper.mcp.wire"


def test_the_face_imports_the_sdk_at_module_level() -> None:
    inside = []
    for path in _sources(["mcp"]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""]
                if any(n.split(".")[0] in ("mcp", "mcp_types") for n in names):
                    inside.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert inside == []


def test_call_ids_are_unguessable_and_read_the_os_once_per_hundreds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Each read of the OS's randomness lets go of the GIL: on serve's event loop that handed
    # the GIL to the audit writer thread once per call.
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    face = MCPFace(ToolInvoker(Toolbox([add])))
    reads: list[int] = []
    real = os.urandom

    def counted(size: int) -> bytes:
        reads.append(size)
        return real(size)
    monkeypatch.setattr(os, "urandom", counted)
    monkeypatch.setattr(random, "_urandom", counted)  # what the secrets module reads through
    calls = [anyio.run(face.parse_call, "add", {"a": 1, "b": n}) for n in range(400)]
    ids = [call.id for call in calls]
    assert len(set(ids)) == 400
    assert all(re.fullmatch(r"mcp_[A-Za-z0-9_-]{12}", ident) for ident in ids)
    assert len(reads) <= 1  # a pool of 455 ids (9 bytes, 72 bits, each) per read


def test_a_forked_child_draws_other_call_ids_than_its_parent() -> None:
    wire.call_id()  # the parent's pool is filled
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        os.write(write, wire.call_id().encode())
        os._exit(0)
    os.waitpid(child, 0)
    os.close(write)
    from_child = os.read(read, 100).decode()
    os.close(read)
    assert from_child.startswith("mcp_") and from_child != wire.call_id()
