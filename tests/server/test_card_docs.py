"""docs/approval.md's example of a card view for your own tool runs as written."""

from __future__ import annotations

import re
from pathlib import Path

from toolkeeper.server.cards import find_card_view, register_card_view

DOC = Path(__file__).resolve().parents[2] / "docs" / "approval.md"


def test_the_card_view_example_in_the_docs_runs_as_written() -> None:
    section = DOC.read_text().split("### A view for your own tool", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)[:1]
    namespace: dict[str, object] = {"__name__": "docs_example"}
    try:
        exec(compile(code, str(DOC), "exec"), namespace)
        assert find_card_view("scale_service") is namespace["scale_card"]
    finally:
        register_card_view("scale_service", None)
    sections = namespace["sections"]
    assert isinstance(sections, list) and sections[1].old == "replicas: 2\nimage: shop:1.4\n"
