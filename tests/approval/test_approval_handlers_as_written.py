"""Approval as agent code written for other tool layers does it: a handler answering
``ApprovalDecision.APPROVED`` (or a string, a bool, a decision), ``ApprovalRequest(call=...)``
and hooks that read ``tool_name``."""

from __future__ import annotations

import pytest

from toolkeeper import (
    ApprovalDecision,
    ApprovalRequest,
    HookEvent,
    HookManager,
    InvocationResult,
    Toolbox,
    ToolCall,
    ToolInvoker,
    ToolRisk,
    tool,
)
from toolkeeper.approval import ApprovalOutcome

pytestmark = pytest.mark.anyio
SENT: list[str] = []


@tool(risk="critical")
def send_email(to: str) -> str:
    """Send an email."""
    SENT.append(to)
    return f"Email sent to {to}"


class ScriptedApprovalHandler:
    """A handler written that way: it answers whatever it was told to."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.seen: list[ApprovalRequest] = []

    async def request(self, request: ApprovalRequest) -> ApprovalDecision:
        self.seen.append(request)
        return self.answer  # type: ignore[return-value]


async def run_once(answer: object, hooks: HookManager | None = None
                   ) -> tuple[InvocationResult, ScriptedApprovalHandler]:
    handler = ScriptedApprovalHandler(answer)
    box = Toolbox()
    box.add(send_email)
    invoker = ToolInvoker(box, approval_handler=handler, hooks=hooks)
    call = ToolCall(id="call_1", name="send_email", arguments={"to": "ada@example.com"})
    session = invoker.open_session()
    async with session:
        result = await invoker.invoke(call, session=session)
    return result, handler


def test_the_decisions_are_class_level_constants_equal_to_their_strings() -> None:
    assert ApprovalDecision.APPROVED == "approved" and ApprovalDecision.DENIED == "denied"
    assert ApprovalDecision.SKIPPED == "skipped"
    assert isinstance(ApprovalDecision.APPROVED, ApprovalOutcome)
    decision = ApprovalDecision(request_id="apr_1", outcome=ApprovalDecision.DENIED)
    assert decision.outcome == "denied" and not decision.approved
    assert '"outcome":"denied"' in decision.model_dump_json()


@pytest.mark.parametrize("answer", [ApprovalDecision.APPROVED, "approved", "APPROVED", True])
async def test_a_handler_answering_approved_in_any_accepted_form_runs_the_tool(
        answer: object) -> None:
    SENT.clear()
    result, handler = await run_once(answer)
    assert result.status == "ok" and result.text == "Email sent to ada@example.com"
    assert SENT == ["ada@example.com"]
    assert handler.seen[0].call.name == "send_email"
    assert handler.seen[0].call.arguments == {"to": "ada@example.com"}


@pytest.mark.parametrize("answer", [ApprovalDecision.DENIED, ApprovalDecision.SKIPPED, "denied",
                                    False])
async def test_a_handler_answering_denied_or_skipped_stops_the_call(answer: object) -> None:
    SENT.clear()
    result, _ = await run_once(answer)
    assert result.status == "denied" and SENT == []


async def test_a_full_decision_still_answers() -> None:
    SENT.clear()
    handler = ScriptedApprovalHandler(None)

    async def decide(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(request_id=request.id, outcome=ApprovalDecision.APPROVED,
                                approver="ops")

    handler.request = decide  # type: ignore[method-assign]
    invoker = ToolInvoker(Toolbox([send_email]), approval_handler=handler)
    async with invoker.open_session() as session:
        result = await invoker.invoke(ToolCall(id="c", name="send_email",
                                               arguments={"to": "b@example.com"}),
                                      session=session)
    assert result.ok and SENT == ["b@example.com"]


@pytest.mark.parametrize(("answer", "named"), [("maybe", "'maybe'"), (42, "a int"),
                                               (None, "a NoneType")])
async def test_any_other_answer_is_a_clear_error_and_nothing_runs(answer: object,
                                                                  named: str) -> None:
    SENT.clear()
    result, _ = await run_once(answer)
    assert result.status == "error" and SENT == []
    assert named in result.text and "ApprovalDecision" in result.text


def test_an_approval_request_is_built_from_the_call_it_is_about() -> None:
    call = ToolCall(id="call_7", name="send_email", arguments={"to": "x@example.com"})
    request = ApprovalRequest(call=call, risk=ToolRisk.CRITICAL)  # type: ignore[call-arg]
    assert request.call == call
    assert (request.call_id, request.tool, request.arguments) == (
        "call_7", "send_email", {"to": "x@example.com"})
    again = ApprovalRequest.model_validate_json(request.model_dump_json())
    assert again == request and again.call == call  # immutable and fully serializable
    with pytest.raises(ValueError, match="call must be a ToolCall"):
        ApprovalRequest(call={"name": "send_email"}, risk=ToolRisk.CRITICAL)  # type: ignore[call-arg]


async def test_hook_payloads_carry_tool_name_beside_tool() -> None:
    hooks = HookManager()
    seen: list[tuple[HookEvent, dict[str, object]]] = []
    for event in (HookEvent.TOOL_START, HookEvent.TOOL_END, HookEvent.APPROVAL_REQUESTED,
                  HookEvent.APPROVAL_DECIDED):
        hooks.register(event, lambda e, payload: seen.append((e, payload)))
    await run_once(ApprovalDecision.APPROVED, hooks)
    assert [e for e, _ in seen] == [HookEvent.TOOL_START, HookEvent.APPROVAL_REQUESTED,
                                    HookEvent.APPROVAL_DECIDED, HookEvent.TOOL_END]
    for _, payload in seen:
        assert payload["tool_name"] == payload["tool"] == "send_email"
