"""Validate: arguments against the tool's schema; ``$artifact`` refs are checked and resolved
for validation, but stay refs for guardrails and approval until the artifact gate."""

from __future__ import annotations

import re

from ...artifacts.store import Blob, BlobStore, UnknownArtifactError
from ...errors import InvalidArgumentsError
from ...tools.tool import Tool
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["ValidateGate", "artifact_ref"]


def artifact_ref(value: object) -> str | None:
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("$artifact"), str):
        return str(value["$artifact"])
    return None


def _content(blob: Blob) -> str | bytes:
    textual = blob.media_type.startswith("text/") or blob.media_type.endswith("json")
    return blob.data.decode("utf-8", errors="replace") if textual else blob.data


class ValidateGate(Gate):
    name = "validate"

    def __init__(self, artifact_store: BlobStore | None = None) -> None:
        self.artifact_store = artifact_store

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        tool = inv.known_tool
        if not isinstance(tool, Tool):  # a provider's tool takes the call as it came
            return await call_next(inv.evolve(arguments=dict(inv.call.arguments)))
        raw = inv.call.arguments
        refs: dict[str, str] = {}
        for key, value in raw.items():  # a loop, not a comprehension: no frame of its own
            if isinstance(value, dict) and (ref := artifact_ref(value)) is not None:
                refs[key] = ref
        if not refs:
            return await call_next(inv.evolve(arguments=tool.validate_arguments(raw)))
        resolved = self._resolve(inv, raw, refs)
        try:
            validated = tool.validate_arguments(resolved)
        except InvalidArgumentsError as exc:  # told without the content of the artifacts
            raise _unechoed(exc, refs, tool) from None
        shown = {**validated, **{k: raw[k] for k in refs}}
        return await call_next(inv.evolve(arguments=shown, resolved=validated))

    def _resolve(self, inv: Invocation, raw: dict[str, object], refs: dict[str, str]
                 ) -> dict[str, object]:
        store = self.artifact_store
        out = dict(raw)
        for key, ref in refs.items():
            if store is None:
                raise InvalidArgumentsError(
                    f"argument '{key}' refers to artifact {ref!r} but no artifact store is "
                    "configured", tool_name=inv.call.name)
            try:
                if not inv.session.holds(ref):  # another owner's is as if it did not exist
                    raise UnknownArtifactError(ref)
                out[key] = _content(store.resolve(ref))
            except UnknownArtifactError:
                raise InvalidArgumentsError(
                    f"argument '{key}' refers to unknown artifact {ref!r}; pass a ref returned by "
                    "an earlier call of this session", tool_name=inv.call.name) from None
        return out


def _unechoed(exc: InvalidArgumentsError, refs: dict[str, str], tool: Tool
              ) -> InvalidArgumentsError:
    """The refusal of arguments some of which came from artifacts, without what those hold: a
    problem of such an argument names its artifact and what the argument takes (a
    validator's message quotes the value it got, and that value is the artifact's content)."""
    problems = exc.details.get("problems")
    told: list[str] = []
    kept: list[dict[str, object]] = []
    for problem in problems if isinstance(problems, list) else []:
        root = re.split(r"[.\[]", str(problem.get("path", "")), maxsplit=1)[0]
        if root not in refs:
            told.append(str(problem.get("message", "")))
            kept.append(problem)
            continue
        line = (f"argument '{root}' refers to artifact {refs[root]}, whose content does not fit "
                f"it{_takes(tool, root)}")
        if line not in told:
            told.append(line)
            kept.append({"path": root, "message": line, "artifact": refs[root]})
    if not told:  # a validator that says no more than that: every ref named, nothing quoted
        told = [f"the arguments (with artifact(s) {', '.join(refs.values())}) do not fit the "
                "tool's schema"]
    return InvalidArgumentsError(
        f"invalid arguments for tool '{tool.name}': {'; '.join(told)}. Fix the arguments and "
        "call the tool again.", tool_name=exc.tool_name, details={"problems": kept})


def _takes(tool: Tool, name: str) -> str:
    """`` (it takes an integer)`` from the tool's schema, when it says so simply."""
    prop = (tool.parameters.get("properties") or {}).get(name)
    kind = prop.get("type") if isinstance(prop, dict) else None
    if not isinstance(kind, str):
        return ""
    return f" (it takes {'an' if kind[:1] in 'aeiou' else 'a'} {kind})"
