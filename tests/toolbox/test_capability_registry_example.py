"""A capability registry's documented example, run as written with its imports mapped to
toolkeeper's: register, look up, fuzzy search, browse, by risk; ``CapabilityEntry`` and
``CategoryNode``."""

from __future__ import annotations

from toolkeeper import (
    BaseTool,
    CapabilityEntry,
    CapabilityRegistry,
    CategoryNode,
    HitlMode,
    Toolbox,
    ToolResult,
    ToolRisk,
    tool,
)

SENT: list[str] = []


class SendEmailTool(BaseTool):
    risk = ToolRisk.CRITICAL  # Strategy: class-level
    hitl_mode = HitlMode.BLOCKING  # Agent suspends until user approves

    def __init__(self) -> None:
        super().__init__(
            name="send_email",
            description="Send an email to a recipient",
            input_schema={
                "type": "object",
                "properties": {
                    "to": {"type": "string", "description": "Recipient email"},
                    "subject": {"type": "string"},
                    "body": {"type": "string"},
                },
                "required": ["to", "subject", "body"],
            },
        )

    async def execute(self, *, to: str, subject: str, body: str) -> ToolResult:  # type: ignore[override]
        SENT.append(to)
        return ToolResult(
            content=[{"type": "text", "text": f"Email sent to {to}"}],
            app_data={"recipients": [to]},  # ← use app_data, not metadata
        )


@tool(risk="safe")
def plot_chart(series: list[float]) -> str:
    """Draw a line chart of a series of numbers."""
    return "chart"


@tool(risk="sensitive")
def read_table(name: str) -> str:
    """Read the rows of a database table."""
    return name


def example_registry() -> CapabilityRegistry:
    registry = CapabilityRegistry()
    # Register
    registry.register_tool(
        SendEmailTool(),
        category="communication",
        tags=["email", "notify"],
    )
    registry.register_tool(plot_chart, category="data/visualization", tags=["chart"])
    registry.register_tool(read_table, category="data/exploration", tags=["sql"])
    return registry


def test_the_capability_registry_example_runs_as_written() -> None:
    registry = example_registry()
    assert CapabilityRegistry is Toolbox  # the catalog under the registry's name

    # Lookup by name or alias
    tool = registry.get_tool("send_email")
    assert isinstance(tool, SendEmailTool)

    # Fuzzy search
    results = registry.search("send a notification", limit=5)
    assert results[0].name == "send_email"

    # Browse a category
    tools = registry.browse("communication")
    assert [t.name for t in tools] == ["send_email"]
    assert {t.name for t in registry.browse("data")} == {"plot_chart", "read_table"}

    # All tools at a given risk level
    risky = registry.by_risk(ToolRisk.CRITICAL)
    assert [t.name for t in risky] == ["send_email"]
    assert SENT == []  # looking things up runs nothing


def test_search_results_are_capability_entries() -> None:
    registry = example_registry()
    top = registry.search("send a notification", limit=5)[0]
    assert isinstance(top, CapabilityEntry)
    assert (top.name, top.description, top.kind) == (
        "send_email", "Send an email to a recipient", "local")
    assert top.tags == {"email", "notify"} and top.category == "communication"
    entry = registry.entry("plot_chart")
    assert isinstance(entry, CapabilityEntry)
    assert (entry.description, entry.tags) == ("Draw a line chart of a series of numbers.",
                                               frozenset({"chart"}))
    assert not isinstance(object(), CapabilityEntry)


def test_search_by_tag_finds_the_tool_a_word_of_its_description_does_not_name() -> None:
    registry = example_registry()
    assert registry.search("notify", limit=5)[0].name == "send_email"
    assert registry.search("sql", limit=5)[0].name == "read_table"


def test_the_category_tree_is_made_of_category_nodes() -> None:
    registry = example_registry()
    root = registry.category_tree()
    assert isinstance(root, CategoryNode) and root.path == ""
    # the built-in categories are all there, each under its parent
    assert [c.name for c in root.children] == sorted(
        ["communication", "creative", "data", "development", "media", "productivity",
         "research", "system"])
    data = root.find("data")
    assert data is not None
    assert [c.path for c in data.children] == ["data/exploration", "data/management",
                                               "data/visualization"]
    assert root.find("data/visualization").tools == ("plot_chart",)  # type: ignore[union-attr]
    assert root.find("communication").tools == ("send_email",)  # type: ignore[union-attr]
    assert data.tools == () and root.find("nowhere") is None
    assert registry.category_tree("data").find("data/exploration").tools == (  # type: ignore[union-attr]
        "read_table",)
    everything = {n.path for n in root.walk()}
    assert {"development/execution", "development/project"} <= everything
