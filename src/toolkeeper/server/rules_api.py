"""Rules from decisions, on the page and in the API — the operator's only.

- ``POST /api/approvals/{id}/decision`` with a ``rule`` (``ApprovalAPI`` hands it here): the
  decision and the rule in one step. The rule is built and checked first (never wider than the
  request, valid against the catalog's schema), the decision is recorded (its approver names the
  rule: ``operator:NAME (rule rule_…)``), then the rule is saved and this process applies it at
  once (every other process within a second).
- ``GET /api/approvals/{id}/proposal``: the rule the card proposes (``effect``, ``client``,
  ``for`` and ``arg.NAME`` parameters), for the person to edit.
- ``GET /api/rules`` and ``POST /api/rules/{id}/revoke``; the page's ``/rules`` lists the
  rules (who, when, uses, until when, the text) and revokes them; the card's rule form posts to
  ``/approvals/{id}/rule``.

A client token is refused everywhere here (403): no client reads, writes or widens a rule.
"""

from __future__ import annotations

import contextlib
import json
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio.to_thread

from ..approval.store import SqliteApprovalStore, StoredApproval
from ..core.context import Caller
from ..errors import ConfigError, StoreError
from ..extras import MissingExtraError
from ..invoke.audit import AuditLog
from ..policy.engine import Policies
from ..policy.store import PolicyRule
from .auth import WebSessions
from .clients import OPERATOR
from .decide import DecisionError, decide
from .deciding import Deciders, approver_of
from .page import MAX_MESSAGE
from .requests import caller_of, root_of
from .rule_making import (
    PINNED,
    RuleChoice,
    choice_of,
    matching,
    pinned_args,
    proposal_text,
    rule_json,
    rule_of,
    shown_args,
)
from .views import approval_json

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

    from ..toolbox.catalog import CatalogBase

__all__ = ["RuleRoutes"]

HERE = Path(__file__).resolve().parent
NO_CLIENT = ("rules are the operator's: a client token neither reads nor writes them (log in "
             "on the page, or send the operator token)")


class RuleRoutes:
    """The routes above over one approval store and the server's ``Policies`` (``None``: this
    server keeps no rules; making one is refused with that message)."""

    def __init__(self, store: SqliteApprovalStore, audit: AuditLog | None,
                 sessions: WebSessions, policies: Policies | None, *,
                 title: str = "toolkeeper") -> None:
        from jinja2 import Environment, FileSystemLoader, select_autoescape

        self.store, self.audit, self.sessions, self.policies = store, audit, sessions, policies
        self.deciders, self.title = Deciders(policies), title
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"),
                               autoescape=select_autoescape(default=True,
                                                            default_for_string=True))

    def routes(self) -> list[BaseRoute]:
        from starlette.routing import Route

        return [
            Route("/api/approvals/{id}/proposal", self.proposal),
            Route("/api/rules", self.list_rules),
            Route("/api/rules/{id}/revoke", self.revoke, methods=["POST"]),
            Route("/rules", self.rules_page),
            Route("/rules/{id}/revoke", self.revoke_form, methods=["POST"]),
            Route("/approvals/{id}/rule", self.decide_form, methods=["POST"]),
        ]

    # -- the API ----------------------------------------------------------------------------

    async def decide_api(self, request: Request, body: dict[str, Any], *,
                         catalog: CatalogBase | None = None) -> Response:
        """``POST /api/approvals/{id}/decision`` with a ``rule`` (and, approving, perhaps
        edited ``arguments``, checked against the tool's schema in ``catalog``)."""
        caller = caller_of(request)
        choice_text = str(body.get("decision", ""))
        try:
            choice = choice_of(body.get("rule"), approve=choice_text == "approve")
            after, rule = await self._decide(caller, request.path_params["id"], choice_text,
                                             choice, message=str(body.get("message", "")),
                                             digest=body.get("args_digest"),
                                             arguments=body.get("arguments"), catalog=catalog)
        except (ConfigError, MissingExtraError) as exc:
            return _error(400, "bad_rule", str(exc))
        except DecisionError as exc:
            return _error(exc.status, exc.code, str(exc))
        return _json({**approval_json(after), "rule": rule_json(rule)})

    async def proposal(self, request: Request) -> Response:
        caller = caller_of(request)
        try:
            stored = await self._decidable(caller, request.path_params["id"])
            params = request.query_params
            choice = RuleChoice(effect="forbid" if params.get("effect") == "forbid"
                                else "permit", any_client=params.get("client") == "any",
                                args=_args(stored, params.multi_items(), self.policies)
                                if params.get("args_given") == "1" else None,
                                duration=params.get("for", "once"))
            text = await anyio.to_thread.run_sync(proposal_text, stored, choice,
                                                  self._policies())
        except (ConfigError, MissingExtraError) as exc:
            return _error(400, "bad_rule", str(exc))
        except DecisionError as exc:
            return _error(exc.status, exc.code, str(exc))
        policies = self._policies()
        return _json({"text": text, "args": shown_args(stored, policies),
                      "pinned": pinned_args(stored, policies), "tool": stored.request.tool})

    async def list_rules(self, request: Request) -> Response:
        if caller_of(request).client != OPERATOR:
            return _error(403, "forbidden", NO_CLIENT)
        everything = request.query_params.get("all") in ("1", "true")
        found = await anyio.to_thread.run_sync(partial(self._rules, everything=everything))
        return _json({"rules": [rule_json(r) for r in found]})

    async def revoke(self, request: Request) -> Response:
        caller = caller_of(request)
        if caller.client != OPERATOR:
            return _error(403, "forbidden", NO_CLIENT)
        if caller.via == "cookie" and not self.sessions.csrf_ok(
                caller.page_secret, request.headers.get("x-csrf-token", "")):
            return _error(403, "csrf", "send the page's CSRF token as X-CSRF-Token")
        rule_id = request.path_params["id"]
        if not await anyio.to_thread.run_sync(self._revoke, rule_id):
            return _error(404, "not_found", f"no rule {rule_id!r} in force (see GET /api/rules)")
        return _json({"id": rule_id, "revoked": True})

    # -- the page ---------------------------------------------------------------------------

    async def rules_page(self, request: Request) -> Response:
        caller = caller_of(request)
        if caller.client != OPERATOR:
            return self._message(request, 403 if caller.client else 401, "Rules", NO_CLIENT)
        found = await anyio.to_thread.run_sync(partial(self._rules, everything=True))
        return self._render(request, "rules.html", rules=[_shown(r) for r in found])

    async def revoke_form(self, request: Request) -> Response:
        caller = caller_of(request)
        form = await request.form(max_files=0, max_fields=4)
        if caller.client != OPERATOR or not self.sessions.csrf_ok(
                caller.page_secret, str(form.get("csrf", ""))):
            return self._message(request, 403, "Refused", "The form is stale or came from "
                                 "elsewhere (CSRF check), or you are not the operator.")
        await anyio.to_thread.run_sync(self._revoke, request.path_params["id"])
        return _redirect(request, "/rules")

    async def decide_form(self, request: Request) -> Response:
        caller = caller_of(request)
        form = await request.form(max_files=0, max_fields=200)
        if caller.client != OPERATOR or not self.sessions.csrf_ok(
                caller.page_secret, str(form.get("csrf", ""))):
            return self._message(request, 403, "Refused", "The form is stale or came from "
                                 "elsewhere (CSRF check), or you are not the operator.")
        effect: Literal["permit", "forbid"] = ("forbid" if form.get("effect") == "forbid"
                                                else "permit")
        decision = "approve" if effect == "permit" else "deny"
        try:
            shown = str(form.get("decision") or decision)  # what the page's button said
            if shown != decision:
                matching(effect, shown)
            stored = await self._decidable(caller, request.path_params["id"])
            given = form.get("args_given") == "1"
            on = {f"arg.{name}" for name in form.getlist("arg_on")}  # the boxes ticked
            choice = RuleChoice(
                effect=effect, any_client=form.get("client") == "any",
                args=_args(stored, [(str(k), str(v)) for k, v in form.multi_items() if k in on],
                           self.policies)
                if given else None, duration=str(form.get("for", "once")),
                text=str(form.get("text", "")), reason=str(form.get("reason", ""))[:500])
            await self._decide(caller, request.path_params["id"], decision, choice,
                               message=str(form.get("rule_message", "")),
                               digest=str(form.get("digest", "")))
        except (ConfigError, MissingExtraError) as exc:
            return self._message(request, 400, "Rule not saved", str(exc))
        except DecisionError as exc:
            return self._message(request, exc.status, "Not decided", str(exc))
        return _redirect(request, "/")

    # -- the work ---------------------------------------------------------------------------

    async def _decidable(self, caller: Caller, request_id: str) -> StoredApproval:
        """The request, when ``caller`` is an operator who may decide it."""
        if caller.client != OPERATOR:
            raise DecisionError(403, "forbidden", NO_CLIENT)
        stored = await anyio.to_thread.run_sync(self.store.get, request_id)
        if stored is None:
            raise DecisionError(404, "not_found", f"no approval request {request_id!r}")
        refused = await anyio.to_thread.run_sync(self.deciders.refusal, caller, stored)
        if refused is not None:
            raise DecisionError(403, "not_allowed", refused)
        return stored

    async def _decide(self, caller: Caller, request_id: str, decision: str,
                      choice: RuleChoice, *, message: str, digest: object,
                      arguments: object = None, catalog: CatalogBase | None = None
                      ) -> tuple[StoredApproval, PolicyRule]:
        """Check the rule, record the decision (naming the rule), then save the rule."""
        stored = await self._decidable(caller, request_id)
        if decision not in ("approve", "deny"):
            raise DecisionError(400, "bad_request", "a decision with a rule is approve or deny")
        author = approver_of(caller)
        rule = await anyio.to_thread.run_sync(partial(rule_of, stored, choice,
                                                      self._policies(), author=author,
                                                      decision=decision))
        after = await decide(self.store, self.audit, caller.client, request_id, decision,
                             message=message[:MAX_MESSAGE], digest=digest,
                             approver=f"{author} (rule {rule.id})",
                             judge=partial(self.deciders.refusal, caller),
                             arguments=arguments, catalog=catalog)
        await anyio.to_thread.run_sync(self._save, rule)
        return after, rule

    def _policies(self) -> Policies:
        if self.policies is None or self.policies.store is None:
            raise ConfigError("this server keeps no rules (it has no policy store); decide "
                              "without a rule")
        return self.policies

    def _save(self, rule: PolicyRule) -> None:
        policies = self._policies()
        assert policies.store is not None
        policies.store.add(rule)
        # this process applies it now, the others within a second; a problem is the
        # watcher's to report (in one line), and the last good set keeps deciding
        with contextlib.suppress(ConfigError, StoreError):
            policies.refresh()

    def _rules(self, *, everything: bool) -> list[PolicyRule]:
        if self.policies is None or self.policies.store is None:
            return []
        return list(reversed(self.policies.store.rules(everything=everything)))

    def _revoke(self, rule_id: str) -> bool:
        if self.policies is None or self.policies.store is None:
            return False
        done = self.policies.store.revoke(rule_id)
        if done:
            with contextlib.suppress(ConfigError, StoreError):
                self.policies.refresh()
        return done

    def _render(self, request: Request, name: str, status: int = 200, **values: Any
                ) -> Response:
        from starlette.responses import HTMLResponse

        secret = caller_of(request).page_secret
        html = self.env.get_template(name).render(
            title=self.title, csrf=self.sessions.csrf(secret) if secret else "",
            root=root_of(request), **values)
        return HTMLResponse(html, status_code=status, headers={"cache-control": "no-store"})

    def _message(self, request: Request, status: int, heading: str, text: str) -> Response:
        return self._render(request, "message.html", status=status, heading=heading, text=text)


def _args(stored: StoredApproval, items: list[tuple[str, str]], policies: Policies | None
          ) -> dict[str, object]:
    """The arguments chosen (``arg.NAME=VALUE``): a value keeps the type the request's argument
    has (a number stays a number); one a rule takes exactly as sent stays pinned."""
    chosen: dict[str, object] = {}
    pinned = set(pinned_args(stored, policies))
    for key, value in items:
        if not key.startswith("arg."):
            continue
        name = key[4:]
        original = stored.request.arguments.get(name)
        chosen[name] = value
        if name in pinned:  # taken exactly as sent, whatever the field says
            chosen[name] = PINNED
            continue
        if original is not None and not isinstance(original, str):
            try:
                chosen[name] = json.loads(value)
            except ValueError:
                raise ConfigError(f"argument {name!r}: {value!r} is not a "
                                  f"{type(original).__name__}") from None
    return chosen


def _shown(rule: PolicyRule) -> dict[str, object]:
    def when(stamp: float | None) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(stamp)) if stamp else ""

    return {**rule_json(rule), "created_at": when(rule.created),
            "expires_at": when(rule.expires) or ("one call" if "@once" in rule.cedar
                                                 else "until revoked"),
            "revoked_at": when(rule.revoked)}


def _redirect(request: Request, path: str) -> Response:
    from starlette.responses import RedirectResponse

    return RedirectResponse(root_of(request) + path, status_code=303)


def _json(body: object, status: int = 200) -> Response:
    from starlette.responses import JSONResponse

    return JSONResponse(body, status_code=status)


def _error(status: int, error: str, message: str) -> Response:
    return _json({"error": error, "message": message}, status)
