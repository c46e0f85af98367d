"""File tools against hostile workspaces: traversal, prefixes, links, races, special files."""

from __future__ import annotations

import os
import threading
import time
import unicodedata
from pathlib import Path

import pytest

from toolkeeper import InvalidArgumentsError, PolicyViolationError, Tool
from toolkeeper.builtins.files import file_tools
from toolkeeper.builtins.policy import SecurityPolicy

SECRET = "TOP-SECRET-OUTSIDE"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (tmp_path / "secret.txt").write_text(SECRET)
    (tmp_path / "ws-evil").mkdir()
    (tmp_path / "ws-evil" / "loot.txt").write_text(SECRET)
    return root


def tools(ws: Path, **policy: object) -> dict[str, Tool]:
    return {t.name: t for t in file_tools(SecurityPolicy(workspace=ws, **policy))}


def refused(tool: Tool, **arguments: object) -> str:
    with pytest.raises((PolicyViolationError, InvalidArgumentsError)) as info:
        tool.run_raw(arguments)
    return str(info.value)


def test_read_with_line_numbers_offset_and_limit(ws: Path) -> None:
    read = tools(ws)["file_read"]
    assert read.run_raw({"path": "notes.txt"}) == "     1\talpha\n     2\tbeta\n     3\tgamma"
    assert read.run_raw({"path": "notes.txt", "offset": 1, "limit": 1}) == (
        "     2\tbeta\n[1 more lines; read on with offset=2]")
    assert str(read.run_raw({"path": str(ws / "notes.txt")})).startswith("     1\talpha")


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../secret.txt", "outside the workspace"),
        ("sub/../../secret.txt", "does not exist"),
        ("/etc/passwd", "outside the workspace"),
        ("../ws-evil/loot.txt", "outside the workspace"),
        ("notes.txt\x00.png", "NUL byte"),
    ],
)
def test_paths_that_leave_the_workspace_are_refused(ws: Path, path: str, reason: str) -> None:
    message = refused(tools(ws)["file_read"], path=path)
    assert reason in message or "resolves outside" in message


def test_prefix_confusion_with_a_sibling_directory(ws: Path) -> None:
    evil = str(ws) + "-evil/loot.txt"
    assert "outside the workspace" in refused(tools(ws)["file_read"], path=evil)


def test_symlinks_out_of_the_workspace_are_refused(ws: Path, tmp_path: Path) -> None:
    (ws / "link.txt").symlink_to(tmp_path / "secret.txt")
    (ws / "linkdir").symlink_to(tmp_path / "ws-evil")
    (ws / "proc").symlink_to("/proc/self/root/etc/passwd")
    for path in ("link.txt", "linkdir/loot.txt", "proc"):
        assert SECRET not in refused(tools(ws)["file_read"], path=path)


def test_symlink_inside_to_a_protected_file_is_refused_by_its_real_path(ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n\tfsmonitor = evil\n")
    (ws / "innocent").symlink_to(".git/config")
    (ws / "gitdir").symlink_to(".git")
    read = tools(ws)["file_read"]
    assert "symbolic link" in refused(read, path="innocent")  # O_NOFOLLOW on the last part
    assert "forbidden-path rule '.git'" in refused(read, path="gitdir/config")


def test_writes_never_go_through_symlinks(ws: Path, tmp_path: Path) -> None:
    (ws / "out").symlink_to(tmp_path)
    (ws / "target.txt").symlink_to(tmp_path / "secret.txt")
    write = tools(ws)["file_write"]
    assert "symbolic link" in refused(write, path="out/new.txt", content="x")
    assert "not a regular file" in refused(write, path="target.txt", content="x")
    assert (tmp_path / "secret.txt").read_text() == SECRET
    assert not (tmp_path / "new.txt").exists()


def test_hard_links_fifos_and_devices_are_refused(ws: Path, tmp_path: Path) -> None:
    os.link(tmp_path / "secret.txt", ws / "hard.txt")
    os.mkfifo(ws / "pipe")
    (ws / "null").symlink_to("/dev/null")
    read = tools(ws)["file_read"]
    assert "hard-linked" in refused(read, path="hard.txt")
    start = time.monotonic()
    assert "not a regular file" in refused(read, path="pipe")
    assert time.monotonic() - start < 5  # never blocks on a FIFO
    assert "symbolic link" in refused(read, path="null")
    assert "hard-linked" in refused(tools(ws)["file_write"], path="hard.txt", content="x")
    assert (tmp_path / "secret.txt").read_text() == SECRET


@pytest.mark.parametrize("path", [".git/config", ".git/hooks/pre-commit", "sub/.bashrc",
                                  ".mcp.json", "toolkeeper.db", ".vscode/settings.json"])
def test_protected_files_cannot_be_written_even_before_they_exist(ws: Path, path: str) -> None:
    assert "forbidden-path rule" in refused(tools(ws)["file_write"], path=path, content="x")
    assert not (ws / path).exists()


def test_read_only_autonomy_refuses_writes(ws: Path) -> None:
    message = refused(tools(ws, autonomy="read_only")["file_write"], path="a.txt", content="x")
    assert "security.autonomy" in message


def test_writes_are_atomic_and_create_directories(ws: Path) -> None:
    write = tools(ws)["file_write"]
    assert write.run_raw({"path": "deep/er/file.txt", "content": "hello"}) == (
        "wrote 5 bytes to deep/er/file.txt")
    write.run_raw({"path": "deep/er/file.txt", "content": "bye"})
    assert (ws / "deep/er/file.txt").read_text() == "bye"
    assert [p.name for p in (ws / "deep/er").iterdir()] == ["file.txt"]  # no temp files left


def test_edit_replaces_the_first_match_and_explains_misses(ws: Path) -> None:
    edit = tools(ws)["file_edit"]
    (ws / "code.py").write_text("x = 1\nprint(x)\nx = 1\n")
    assert edit.run_raw({"path": "code.py", "old": "x = 1", "new": "x = 2"}) == (
        "replaced 1 of 2 occurrence(s) in code.py")
    assert (ws / "code.py").read_text() == "x = 2\nprint(x)\nx = 1\n"
    assert "occurs 2 times" in refused(edit, path="code.py", old="x = ", new="y", unique=True)
    missing = refused(edit, path="code.py", old="print(y)", new="z")
    assert "closest text is at line 2" in missing and "print(x)" in missing


def test_binary_files_are_not_shown_and_pdfs_give_their_text(ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    assert "binary file" in refused(tools(ws)["file_read"], path="blob.bin")
    (ws / "doc.pdf").write_bytes(_pdf_with_text("Quarterly report"))
    assert "Quarterly report" in str(tools(ws)["file_read"].run_raw({"path": "doc.pdf"}))


def test_symlink_race_never_leaks_an_outside_file(ws: Path, tmp_path: Path) -> None:
    read = tools(ws)["file_read"]
    flip = ws / "flip"
    flip.write_text("inside")
    stop = threading.Event()

    def attacker() -> None:
        while not stop.is_set():
            try:
                flip.unlink()
                flip.symlink_to(tmp_path / "secret.txt")
                flip.unlink()
                flip.write_text("inside")
            except OSError:
                pass

    thread = threading.Thread(target=attacker)
    thread.start()
    leaks = ok = 0
    # Race for a while, and on a busy machine until at least one read got through
    # (each read that landed between the attacker's steps is refused, not leaked).
    deadline = time.monotonic() + 1.5
    hard_stop = time.monotonic() + 120
    try:
        while (time.monotonic() < deadline or ok == 0) and time.monotonic() < hard_stop:
            try:
                text = str(read.run_raw({"path": "flip"}))
            except (PolicyViolationError, InvalidArgumentsError):
                continue
            leaks += SECRET in text
            ok += 1
    finally:
        stop.set()
        thread.join()
    assert leaks == 0
    assert ok > 0


def _pdf_with_text(text: str) -> bytes:
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 100] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        None,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    stream = f"BT /F1 12 Tf 20 50 Td ({text}) Tj ET".encode()
    objects[3] = b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + \
        b"\nendstream"
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"  # type: ignore[operator]
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


@pytest.mark.parametrize("name", ["evil\x1b]0;pwned\x07.txt", "bell\x07", "rev\u202etxt.exe",
                                  "zero\u200bwidth.txt", "c1\x9bcontrol"])
def test_control_bidi_and_zero_width_characters_in_paths_are_refused_and_never_echoed(
        ws: Path, name: str) -> None:
    t = tools(ws)
    for tool, arguments in ((t["file_write"], {"path": name, "content": "x"}),
                            (t["file_read"], {"path": f"sub/{name}"}),
                            (t["file_edit"], {"path": name, "old": "a", "new": "b"})):
        message = refused(tool, **arguments)
        assert "control, bidi or zero-width characters" in message
        assert not any(unicodedata.category(c) in ("Cc", "Cf") for c in message)
    assert sorted(p.name for p in ws.iterdir()) == ["notes.txt"]


def test_a_write_whose_directory_vanishes_gives_a_tool_error_not_a_raw_exception(
        ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextlib import contextmanager

    from toolkeeper import ToolRaisedError
    from toolkeeper.builtins import fs

    real = fs.Workspace.parent_dir

    @contextmanager
    def vanishing(self: fs.Workspace, rel: str, tool: str, *, create: bool):
        with real(self, rel, tool, create=create) as (dirfd, name):
            os.rmdir(ws / "sub")  # another process removes the directory mid-write
            yield dirfd, name

    monkeypatch.setattr(fs.Workspace, "parent_dir", vanishing)
    with pytest.raises(ToolRaisedError, match="the workspace changed while writing"):
        tools(ws)["file_write"].run_raw({"path": "sub/new.txt", "content": "x"})
