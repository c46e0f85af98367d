"""The exception tree drawn in ``toolkeeper.errors`` is the real one, and codes are stable."""

from __future__ import annotations

import re

from toolkeeper import errors


def _drawn_tree() -> dict[str, str | None]:
    doc = errors.__doc__ or ""
    block = doc.split("::", 1)[1].split("\n\n", 2)[1]
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in block.splitlines():
        match = re.search(r"(\w+)\s*$", line)
        if not match:
            continue
        name = match.group(1)
        depth = match.start(1)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return parents


def _real_tree() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in errors.__all__:
        cls = getattr(errors, name)
        bases = [b for b in cls.__bases__ if issubclass(b, errors.ToolkeeperError)]
        out[name] = bases[0].__name__ if bases else None
    return out


def test_docstring_drawing_matches_the_class_tree() -> None:
    assert _drawn_tree() == _real_tree()


def test_every_error_class_is_drawn() -> None:
    assert set(_drawn_tree()) == set(errors.__all__)


def test_call_error_codes_are_unique() -> None:
    classes = [getattr(errors, n) for n in errors.__all__]
    codes = [c.code for c in classes if issubclass(c, errors.ToolCallError)]
    assert len(codes) == len(set(codes))


def test_the_two_branches_say_whether_the_tool_ran() -> None:
    assert errors.InvalidArgumentsError.did_run is False
    assert errors.ToolTimeoutError.did_run is True
    assert issubclass(errors.InvalidArgumentsError, ValueError)


def test_call_error_serializes_code_message_and_tool() -> None:
    exc = errors.UnknownToolError("unknown tool 'x'", tool_name="x", details={"close": []})
    assert exc.to_dict() == {"code": "unknown_tool", "message": "unknown tool 'x'", "tool": "x",
                             "details": {"close": []}}
