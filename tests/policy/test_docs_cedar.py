"""Every Cedar block of docs/policy.md parses and checks against a catalog with the tools the
page uses, and the default set it shows is what ``policy show`` prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolkeeper import Toolbox, tool
from toolkeeper.invoke import ChainPolicy
from toolkeeper.policy import Policies, default_set_text

PAGE = Path(__file__).resolve().parents[2] / "docs" / "policy.md"
BLOCKS = re.findall(r"^```cedar\n(.*?)^```", PAGE.read_text(), re.S | re.M)


@tool(risk="high")
def deploy(service: str, env: str) -> str:
    """Deploy."""
    return service


@tool
def read_note(path: str) -> str:
    """Read."""
    return path


def test_the_page_has_cedar_blocks() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("block", BLOCKS)
def test_each_cedar_block_checks_against_the_catalog(block: str) -> None:
    Policies(Toolbox([deploy, read_note]), text={"docs/policy.md": block}).load()


def test_the_default_set_shown_is_the_one_printed() -> None:
    printed = [line for line in default_set_text(ChainPolicy()).splitlines()
               if line and not line.startswith("//")]
    shown = next(b for b in BLOCKS if "default.within-ceiling" in b)
    assert [line for line in shown.splitlines() if line] == printed
