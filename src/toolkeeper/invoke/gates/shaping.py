"""Result shaping: small text inline; large text offloaded as an artifact with a preview; media
stored and surfaced as files; without a store, long text truncated (head, or head and tail)."""

from __future__ import annotations

import base64
from typing import Any

from ...core.results import AudioBlock, FileBlock, ImageBlock, JsonBlock, TextBlock
from ...hooks import HookEvent
from ..results import ChainFile, InvocationResult, Status
from ..state import Gate, Invocation, Next

__all__ = ["ShapingGate", "truncate"]

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


class ShapingGate(Gate):
    name = "shaping"

    def needed(self, invoker: Any, tool: Any) -> bool:
        limit = getattr(getattr(tool, "metadata", None), "max_result_size", None)
        return invoker.artifact_store is not None or bool(limit or invoker.policy.max_result_size)

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        result = await call_next(inv)
        tool_result = result.result
        store = inv.invoker.artifact_store
        if tool_result is None or (store is None and not self._limit(inv)):
            return result  # the executor's result is already in its final form
        status: Status = "error" if tool_result.is_error else "ok"
        files = await self._files(inv, tool_result.content) if store is not None else ()
        text = tool_result.text
        ref = None
        policy = inv.invoker.policy
        if store is not None and len(text.encode("utf-8")) > policy.max_inline_result_bytes:
            ref = await self._store(inv, text.encode("utf-8"), "text/plain", inv.call.name)
            preview = text[: policy.max_inline_result_bytes // 2]
            text = (f"{preview}\n[... the full result ({len(text)} characters) is stored as "
                    f"artifact {ref}; pass {{\"$artifact\": \"{ref}\"}} to another tool to use it]")
        elif store is None:
            text = truncate(text, self._limit(inv) or len(text), policy.truncation)
        if text != tool_result.text:
            # What the model is shown is the shaped text, whichever way the result is rendered.
            media = tuple(b for b in tool_result.content if not isinstance(b, TextBlock | JsonBlock))
            tool_result = tool_result.model_copy(update={"content": (TextBlock(text=text), *media)})
        return InvocationResult(
            status=status, text=text, structured=tool_result.structured_content,
            artifact_ref=ref, files=files, result=tool_result, call_id=result.call_id,
            tool=result.tool, approval_id=result.approval_id,
            error_code=result.error_code)

    @staticmethod
    def _limit(inv: Invocation) -> int | None:
        metadata_limit = getattr(inv.tool.metadata, "max_result_size", None)
        return metadata_limit or inv.invoker.policy.max_result_size

    async def _files(self, inv: Invocation, blocks: Any) -> tuple[ChainFile, ...]:
        if inv.invoker.artifact_store is None:
            return ()
        files: list[ChainFile] = []
        for block in blocks:
            if isinstance(block, ImageBlock | AudioBlock) or (
                    isinstance(block, FileBlock) and block.data):
                data = base64.b64decode(block.data or "")
                ref = await self._store(inv, data, block.media_type, getattr(block, "name", None))
                ext = _EXT.get(block.media_type, "bin")
                files.append(ChainFile(path=f"media/{inv.call.name}_{len(files)}.{ext}",
                                       media_type=block.media_type, artifact_ref=ref,
                                       size=len(data)))
        return tuple(files)

    @staticmethod
    async def _store(inv: Invocation, data: bytes, media_type: str, name: str | None) -> str:
        store = inv.invoker.artifact_store
        assert store is not None
        ref = store.put(data, media_type, name=name)
        inv.session.pin(ref)
        hooks = inv.invoker.hooks
        if hooks is not None and hooks.has(HookEvent.ARTIFACT_STORED):
            await hooks.dispatch(HookEvent.ARTIFACT_STORED, {"tool": inv.call.name, "ref": ref,
                                                             "size": len(data)})
        return ref
