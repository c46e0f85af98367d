"""Result shaping: small text inline; large text offloaded as an artifact with a preview; media
stored and surfaced as files; without a store, long text truncated (head, or head and tail).

Whatever the gate shapes is put into the result's one ``ToolResult``, so every way out — the
invoker's result, a rendered provider message, ``execute_tool_calls`` — shows the same text.
That includes its structured content: a result cut short is cut short there too (a client that
prefers structured content got the whole megabyte the preview was to spare it). It becomes
``{"result": <the same preview>}`` when the tool's declared output schema admits that (a tool
returning text, or an open object), is left out when the tool declares none, and is kept whole
only when its schema would refuse the preview: a client checks structured content against the
declared schema, and MCP requires it to conform. A code-mode script's call keeps its structured
content whole: it goes into the sandbox (up to the bridge's own cap), where the script works on
the data so that the model does not have to.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

import jsonschema_rs

from ...artifacts.store import BlobStore
from ...core.results import AudioBlock, ContentBlock, FileBlock, ImageBlock, JsonBlock, TextBlock
from ...core.spec import ToolLike
from ...hooks import HookEvent, HookManager
from ..results import ChainFile, InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["ShapingGate", "shaped_structure", "truncate"]

_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp",
        "audio/wav": "wav", "audio/mpeg": "mp3", "application/pdf": "pdf"}


def truncate(text: str, limit: int, mode: str) -> str:
    """``text`` cut to about ``limit`` characters with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    dropped = len(text) - limit
    marker = f"\n[... {dropped} characters truncated ...]\n"
    if mode == "head":
        return text[:limit] + marker
    head = limit * 2 // 3
    return text[:head] + marker + text[len(text) - (limit - head):]


def shaped_structure(tool: ToolLike, text: str, whole: dict[str, object] | None
                     ) -> dict[str, object] | None:
    """The structured content of a result whose text was cut to ``text``: the same text as
    ``{"result": text}`` if the tool's declared output schema takes it, nothing if it declares
    none, else ``whole`` (what its schema requires)."""
    if whole is None:
        return None
    schema = tool.get_schema("mcp").get("outputSchema")
    if not isinstance(schema, dict):
        return None
    shaped: dict[str, object] = {"result": text}
    try:  # offline: a $ref is resolved inside the schema only, never fetched
        fits = jsonschema_rs.validator_for(schema, offline=True).is_valid(shaped)
    except Exception:  # a schema it cannot read: keep what the tool returned
        fits = False
    return shaped if fits else whole


class ShapingGate(Gate):
    name = "shaping"

    def __init__(self, store: BlobStore | None = None, hooks: HookManager | None = None
                 ) -> None:
        self.store = store
        self.hooks = hooks

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        result = await call_next(inv)
        limit = inv.known_tool.metadata.max_result_size or inv.policy.max_result_size
        if not result.ran or (self.store is None and not limit):
            return result
        tool_result = result.result
        files = await self._files(inv, tool_result.content) if self.store is not None else ()
        text = original = tool_result.text
        ref: str | None = None
        size: int | None = None
        inline = inv.policy.max_inline_result_bytes
        # a lone surrogate (text no UTF-8 holds) is stored as its \udXXX escape
        encoded = text.encode("utf-8", "backslashreplace") if self.store is not None else b""
        if self.store is not None and len(encoded) > inline:
            ref, size = await self._store(inv, encoded, "text/plain", inv.call.name), len(encoded)
            text = (f"{text[: inline // 2]}\n[... the full result ({len(text)} characters) is "
                    f"stored as artifact {ref}; pass {{\"$artifact\": \"{ref}\"}} to another tool "
                    "to use it]")
        elif self.store is None:
            text = truncate(text, limit or len(text), inv.policy.truncation)
        if text != original:
            media = tuple(b for b in tool_result.content if not isinstance(b, TextBlock | JsonBlock))
            whole = tool_result.structured_content  # a script's call keeps it: it goes to
            # the sandbox (the bridge caps it), not to a model or a client
            tool_result = tool_result.model_copy(update={
                "content": (TextBlock(text=text), *media),
                "structured_content": whole if inv.session.chain else shaped_structure(
                    inv.known_tool, text, whole)})
        if tool_result is result.result and not files:
            return result
        return InvocationResult(status=result.status, result=tool_result, ran=True,
                                artifact_ref=ref, artifact_size=size, files=files, **inv.envelope())

    async def _files(self, inv: Invocation, blocks: Iterable[ContentBlock]
                     ) -> tuple[ChainFile, ...]:
        files: list[ChainFile] = []
        for block in blocks:
            if isinstance(block, ImageBlock | AudioBlock) or (
                    isinstance(block, FileBlock) and block.data):
                data = base64.b64decode(block.data or "")
                name = block.name if isinstance(block, FileBlock) else None
                ref = await self._store(inv, data, block.media_type, name)
                ext = _EXT.get(block.media_type, "bin")
                files.append(ChainFile(path=f"media/{inv.call.name}_{len(files)}.{ext}",
                                       media_type=block.media_type, artifact_ref=ref,
                                       size=len(data)))
        return tuple(files)

    async def _store(self, inv: Invocation, data: bytes, media_type: str, name: str | None
                     ) -> str:
        assert self.store is not None
        ref = self.store.put(data, media_type, name=name)
        inv.session.pin(ref)
        if self.hooks is not None and self.hooks.has(HookEvent.ARTIFACT_STORED):
            await self.hooks.dispatch(HookEvent.ARTIFACT_STORED, {
                "tool": inv.call.name, "ref": ref, "size": len(data)})
        return ref
