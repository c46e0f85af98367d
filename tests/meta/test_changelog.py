"""CHANGELOG.md keeps the Keep a Changelog shape: an Unreleased section first, then one section per
released version, newest first, each with a date; inside them only the six kinds of change, each
once and each with at least one entry. The newest release is the version the package carries."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field

import pytest

from .test_layers import ROOT

KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
_VERSION = re.compile(r"## \[(?P<name>Unreleased|\d+\.\d+\.\d+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?$")


@dataclass
class Release:
    name: str
    date: str | None
    kinds: dict[str, list[str]] = field(default_factory=dict)


def parse(text: str) -> list[Release]:
    """The releases of a changelog; a line it cannot place raises ``ValueError`` naming it."""
    releases: list[Release] = []
    kind: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            if not (match := _VERSION.match(line)):
                raise ValueError(f"line {number}: {line!r} is not '## [Unreleased]' or '## [X.Y.Z] - DATE'")
            releases.append(Release(match["name"], match["date"]))
            kind = None
        elif line.startswith("### "):
            kind = line[4:]
            if not releases or kind not in KINDS or kind in releases[-1].kinds:
                raise ValueError(f"line {number}: {line!r} is not one of {KINDS}, once per release")
            releases[-1].kinds[kind] = []
        elif line.startswith("- "):
            if kind is None:
                raise ValueError(f"line {number}: an entry outside a kind of change")
            releases[-1].kinds[kind].append(line[2:])
    return releases


def _key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split("."))


def test_the_changelog_has_unreleased_first_then_dated_versions_newest_first() -> None:
    releases = parse((ROOT / "CHANGELOG.md").read_text())
    assert releases[0].name == "Unreleased" and releases[0].date is None
    versions = releases[1:]
    assert versions and all(r.date is not None for r in versions), [r.name for r in versions]
    assert [r.name for r in versions] == sorted((r.name for r in versions), key=_key, reverse=True)
    dates = [str(r.date) for r in versions]
    assert dates == sorted(dates, reverse=True)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert versions[0].name == project


def test_every_kind_of_change_named_has_an_entry() -> None:
    empty = [(r.name, kind) for r in parse((ROOT / "CHANGELOG.md").read_text())
             for kind, entries in r.kinds.items() if not entries]
    assert empty == []


def test_the_parser_names_a_line_outside_the_shape() -> None:
    good = "# Changelog\n\n## [Unreleased]\n\n### Added\n\n- a thing\n"
    assert parse(good)[0].kinds == {"Added": ["a thing"]}
    for bad, said in (("## Unreleased\n", "line 1"), ("## [Unreleased]\n### Improved\n", "line 2"),
                      ("## [Unreleased]\n- loose\n", "outside"),
                      ("## [Unreleased]\n### Added\n- a\n### Added\n- b\n", "once")):
        with pytest.raises(ValueError, match=said):
            parse(bad)
