"""Validate: arguments against the tool's schema; ``$artifact`` refs are checked and resolved
for validation, but stay refs for guardrails and approval until the artifact gate."""

from __future__ import annotations

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
        refs = {k: ref for k, v in raw.items() if (ref := artifact_ref(v)) is not None}
        if not refs:
            return await call_next(inv.evolve(arguments=tool.validate_arguments(raw)))
        resolved = self._resolve(inv, raw, refs)
        validated = tool.validate_arguments(resolved)
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
                out[key] = _content(store.resolve(ref))
            except UnknownArtifactError:
                raise InvalidArgumentsError(
                    f"argument '{key}' refers to unknown artifact {ref!r}; pass a ref returned by "
                    "an earlier call of this session", tool_name=inv.call.name) from None
        return out
