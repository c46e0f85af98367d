"""The forbidden-path rules matched against hostile paths: the same answer as a plain match of
every pattern against every tail of the path, in a few passes over it however long it is."""

from __future__ import annotations

import fnmatch
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper import PolicyViolationError
from toolkeeper.builtins.files import file_tools
from toolkeeper.builtins.fs import PATH_MAX
from toolkeeper.builtins.policy import DEFAULT_FORBIDDEN, SecurityPolicy

PATTERNS = (*DEFAULT_FORBIDDEN, "a*b", "*", "x?z/*", "[ab]c", "deep/er/*", "k[", "*.pem/*")


def reference(patterns: tuple[str, ...], relative: str) -> str | None:
    """The rule as it reads: each pattern against each tail of the path (``*`` crosses ``/``),
    or a path under a pattern that does not end in ``*``."""
    parts = relative.split("/")
    for pattern in patterns:
        for start in range(len(parts)):
            tail = "/".join(parts[start:])
            if fnmatch.fnmatchcase(tail, pattern) or (
                    not pattern.endswith("*") and tail.startswith(pattern + "/")):
                return pattern
    return None


NAMES = st.sampled_from([".git", "HEAD", ".claude", "a", "b", "ab", "acb", "xyz", "c", "bc",
                         "k[", "deep", "er", "x.pem", ".mise.local.toml", "mise", ".config",
                         "config.toml", "toolkeeper.db-wal", "p.cedar", "hooks", "s p", "é"])


@settings(max_examples=600, deadline=None)
@given(parts=st.lists(NAMES, min_size=1, max_size=7),
       patterns=st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=6, unique=True))
def test_the_rule_found_is_the_one_each_tail_matched_against_each_pattern_finds(
        parts: list[str], patterns: list[str]) -> None:
    policy = SecurityPolicy(workspace=Path("/"), forbidden_paths=tuple(patterns))
    relative = "/".join(parts)
    assert policy.forbidden_rule(relative) == reference(tuple(patterns), relative)


@pytest.mark.parametrize("path", ["a/" * 500_000, "toolkeeper.db-/" * 100_000,
                                  ".claude" + "/.claude" * 200_000])
def test_a_path_of_a_million_components_is_judged_in_a_few_passes(path: str) -> None:
    # matched tail by tail, such a path took days of CPU (2,000 components took 1.8 s, 16,000
    # took 82 s); here the bounded wait is a condition: the answer came at all
    policy = SecurityPolicy(workspace=Path("/"))
    found: list[str | None] = []
    worker = threading.Thread(target=lambda: found.append(policy.forbidden_rule(path)),
                              daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert found, "forbidden_rule did not answer"
    assert found[0] == reference(policy.forbidden_paths, path[:2000])


def test_a_path_longer_than_a_path_may_be_is_refused_before_any_rule_is_matched(
        tmp_path: Path) -> None:
    tools = {tool.name: tool for tool in file_tools(SecurityPolicy(workspace=tmp_path))}
    with pytest.raises(PolicyViolationError) as refused:
        tools["file_read"].run_raw({"path": "a/" * 1_000_000})
    message = str(refused.value)
    assert f"longer than the {PATH_MAX} bytes a path may take" in message
    assert len(message) < 300  # the path is not echoed whole
