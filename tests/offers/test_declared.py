"""Prompts and resources declared in a tools module, as plain data a server serves: a
template's parts are the function's arguments, a prompt's arguments its parameters, and a
client's artifacts are listed and read for that client only."""

from __future__ import annotations

import anyio
import pytest

from toolkeeper import MemoryBlobStore, UsageError, prompt, resource
from toolkeeper.offers import Prompts, Resources
from toolkeeper.offers.resources import ARTIFACT_PREFIX, ResourceNotFound


@resource("notes://{topic}", mime_type="text/plain", completions={"topic": ["alpha", "beta"]})
def note(topic: str) -> str:
    """A note on a topic."""
    return f"note on {topic}"


@prompt
def greet(name: str, mood: str = "warm") -> str:
    """Greet someone.

    Args:
        name: Who to greet.
        mood: How.
    """
    return f"A {mood} hello to {name}"


def test_a_template_reads_its_parts_and_completes_them() -> None:
    offered = Resources([note])
    assert offered.template_listing() == [{"uriTemplate": "notes://{topic}", "name": "note",
                                           "description": "A note on a topic.",
                                           "mimeType": "text/plain"}]
    read = anyio.run(offered.read, "notes://beta", ())
    assert read == {"uri": "notes://beta", "mimeType": "text/plain", "text": "note on beta"}
    assert offered.complete("notes://{topic}", "topic", "a") == ["alpha"]


def test_a_template_part_the_function_does_not_take_is_refused_at_declaration() -> None:
    with pytest.raises(UsageError, match="has no parameter 'topic'"):
        resource("notes://{topic}")(lambda subject: subject)


def test_a_prompts_arguments_are_its_parameters_and_a_missing_one_is_named() -> None:
    offered = Prompts([greet])
    assert offered.listing() == [{"name": "greet", "description": "Greet someone.", "arguments": [
        {"name": "name", "description": "Who to greet.", "required": True},
        {"name": "mood", "description": "How.", "required": False}]}]
    got = anyio.run(offered.get, "greet", {"name": "Ada"})
    assert got["messages"] == [{"role": "user", "content": {"type": "text",
                                                             "text": "A warm hello to Ada"}}]
    with pytest.raises(Exception, match="needs the argument 'name'"):
        anyio.run(offered.get, "greet", {})


def test_an_artifact_is_read_by_the_client_that_holds_it_only() -> None:
    store = MemoryBlobStore()
    ref = store.put(b"the whole result", "text/plain")
    offered = Resources(store=store)
    assert anyio.run(offered.read, ARTIFACT_PREFIX + ref, (ref,))["text"] == "the whole result"
    with pytest.raises(ResourceNotFound):
        anyio.run(offered.read, ARTIFACT_PREFIX + ref, ())  # another client's: not there
