"""``BaseTool``: define a tool by subclassing, with the risk and HITL mode as class attributes."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping

from ..core.context import ToolContext
from ..core.metadata import ToolMetadata
from ..core.risk import HitlMode, ToolRisk
from ..errors import UsageError
from .definition import Defined, define_function
from .naming import normalize_tool_name
from .signature import inspect_function
from .tool import Tool

__all__ = ["BaseTool"]


class BaseTool(Tool):
    """Subclass to define a tool; set ``risk`` and ``hitl_mode`` as class attributes.

    ``execute`` takes the arguments as keyword-only parameters (plus an optional ``ctx``) and
    returns a ``ToolResult`` or any value ``to_tool_result`` accepts. Without an ``input_schema``,
    the schema comes from ``execute``'s signature and docstring.

    ``run``/``arun`` (and ``run_raw``/``arun_raw``) follow the lifecycle a direct run has: the input is
    validated first (invalid input raises ``InvalidArgumentsError``, a ``ValueError``); a tool
    that needs a person's approval (risk above SENSITIVE, or a HITL mode of its own) is then
    refused with a ``UsageError`` that says to call it through ``ToolInvoker``, where guardrails
    and approval apply — a direct call never runs it unapproved::

        class SendEmailTool(BaseTool):
            risk = ToolRisk.CRITICAL
            hitl_mode = HitlMode.BLOCKING

            def __init__(self):
                super().__init__(name="send_email", description="Send an email",
                                 input_schema={...})

            async def execute(self, *, to: str, subject: str, body: str) -> ToolResult: ...
    """

    _ctx_name: str | None

    def __init__(
        self,
        name: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, object] | None = None,
        *,
        metadata: ToolMetadata | None = None,
        namespace: str | None = None,
        risk: ToolRisk | str | None = None,
        hitl_mode: HitlMode | str | None = None,
        output_schema: Mapping[str, object] | None = None,
    ) -> None:
        cls = type(self)
        if cls.execute is Tool.execute:
            raise UsageError(
                f"{cls.__name__} subclasses BaseTool but does not define "
                "'async def execute(self, *, ...)'"
            )
        tool_name = name or _declared_name(cls) or _snake(cls.__name__)
        if input_schema is None:
            info = inspect_function(self.execute, name=tool_name, description=description)
            self._ctx_name = info.ctx_param
            super().__init__(define_function(
                info, self.execute, self.defaults(), namespace=namespace, metadata=metadata,
                risk=risk, hitl_mode=hitl_mode, output_schema=output_schema))
            return
        self._ctx_name = _ctx_name(self.execute)
        super().__init__(
            name=tool_name, description=description or "", parameters=input_schema,
            callable=self.execute, metadata=metadata, namespace=namespace, risk=risk,
            hitl_mode=hitl_mode, output_schema=output_schema)

    def _ctx_param(self) -> str | None:
        return self._ctx_name

    # -- direct runs: validate, then refuse what needs a person (nobody can approve here) --

    def _direct_arguments(self, parameters: Mapping[str, object]) -> dict[str, object]:
        arguments = self.validate_arguments(parameters)
        refuse_unapproved(self)
        return arguments

    def run_raw(self, parameters: Mapping[str, object]) -> object:
        """Validate and run synchronously, returning ``execute``'s value; exceptions propagate.

        Raises:
            InvalidArgumentsError: the input does not match the schema (a ``ValueError``).
            UsageError: the tool needs approval; call it through ``ToolInvoker``.
        """
        return self.call_sync(self._direct_arguments(parameters))

    async def arun_raw(self, parameters: Mapping[str, object]) -> object:
        """The async ``run_raw``."""
        return await self.call_async(self._direct_arguments(parameters))

    def run(self, parameters: Mapping[str, object]) -> object:
        """Like ``run_raw``, but a failure of ``execute`` itself returns
        ``"Error executing <name>: <reason>"`` (deprecated, as ``Tool.run``). Invalid input and
        a tool that needs approval raise, as in ``run_raw``."""
        arguments = self._direct_arguments(parameters)
        try:
            return self.call_sync(arguments)
        except Exception as exc:
            return self._swallowed(exc, "run_raw")

    async def arun(self, parameters: Mapping[str, object]) -> object:
        """The async ``run``."""
        arguments = self._direct_arguments(parameters)
        try:
            return await self.call_async(arguments)
        except Exception as exc:
            return self._swallowed(exc, "arun_raw")


def needs_a_person(tool: Tool) -> bool:
    """Whether an invoker with the default policy would ask a person before running ``tool``:
    its risk is above SENSITIVE, or it chose a HITL mode other than NONE."""
    asks = tool.hitl_explicit and tool.hitl_mode is not HitlMode.NONE
    return tool.risk > ToolRisk.SENSITIVE or asks


def refuse_unapproved(tool: Tool) -> None:
    """Raise ``UsageError`` when a direct run of ``tool`` would skip a person's approval."""
    if needs_a_person(tool):
        raise UsageError(
            f"tool '{tool.name}' (risk {tool.risk.value}, HITL {tool.hitl_mode.value}) needs "
            "approval, so it does not run directly: call it through ToolInvoker, where "
            "guardrails and approval apply (ToolInvoker([tool], approval_handler=...)"
            f".invoke_sync(ToolCall(id=..., name='{tool.name}', arguments=...))); nothing ran")


def _declared_name(cls: type[BaseTool]) -> str | None:
    """The ``name`` a subclass sets in its own body, if it does."""
    declared = cls.__dict__.get("name")
    value = declared.default if isinstance(declared, Defined) else declared
    return value if isinstance(value, str) and value else None


def _ctx_name(method: Callable[..., object]) -> str | None:
    for param in inspect.signature(method).parameters.values():
        annotation = param.annotation
        if param.name == "ctx" or (
            isinstance(annotation, type) and issubclass(annotation, ToolContext)
        ):
            return param.name
    return None


def _snake(class_name: str) -> str:
    base = class_name[:-4] if class_name.endswith("Tool") and len(class_name) > 4 else class_name
    return normalize_tool_name(base)
