"""``[approval.notify]``: which requests go where (risk, tool, client, upstream), and a config
that cannot work is refused at start with one line naming the entry."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from toolkeeper.approval import ApprovalRequest
from toolkeeper.config import ToolkeeperConfig, load_config
from toolkeeper.config.notify import NotifySection, parse_duration
from toolkeeper.errors import ConfigError
from toolkeeper.notify import AppriseChannel, Router, WebhookChannel

SETTINGS = {
    "urls": ["ntfy://127.0.0.1:9/all"],
    "routes": [{"urls": ["ntfy://127.0.0.1:9/critical"], "min_risk": "critical"},
               {"urls": ["ntfy://127.0.0.1:9/git"], "tools": ["git_*"], "clients": ["ci"]},
               {"urls": ["ntfy://127.0.0.1:9/github"], "upstreams": ["github"]}],
}


def _request(tool: str, risk: str, client: str) -> ApprovalRequest:
    return ApprovalRequest(call_id="c", tool=tool, risk=risk, arguments={}, args_digest="d",
                           session_id=f"client-{client}", created_at=time.time())


@pytest.mark.parametrize(("tool", "risk", "client", "topics"), [
    ("deploy", "high", "alice", ["all"]),
    ("deploy", "critical", "alice", ["all", "critical"]),
    ("git_push", "high", "ci", ["all", "git"]),
    ("git_push", "high", "alice", ["all"]),
    ("github-create_issue", "critical", "ci", ["all", "critical", "github"]),
])
def test_a_request_goes_to_every_route_it_matches(tool: str, risk: str, client: str,
                                                  topics: list[str]) -> None:
    router = Router(NotifySection.model_validate(SETTINGS),
                    upstream=lambda name: "github" if name.startswith("github-") else None)
    channels = router.targets(_request(tool, risk, client))
    assert [c.shown.rsplit("/", 1)[1] for c in channels] == topics


def test_the_channels_are_apprise_urls_or_webhooks_in_a_services_json(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_KEY", "k" * 32)
    monkeypatch.setenv("SLACK_HOOK", "https://hooks.slack.com/services/T0/B0/secret")
    section = NotifySection.model_validate({
        "urls": ["mailtos://user:password@example.com?to=ops@example.com",
                 "jsons://bot.example.com/hook",
                 {"url": "${SLACK_HOOK}", "format": "slack"}],
        "signing_key": "${HOOK_KEY}"})
    mail, hook, slack = Router(section).everyone
    assert isinstance(mail, AppriseChannel) and mail.name == "mailto"
    assert "password" not in mail.shown
    assert isinstance(hook, WebhookChannel) and hook.url == "https://bot.example.com/hook"
    assert hook.signing_key == b"k" * 32
    assert isinstance(slack, WebhookChannel) and slack.name == "slack"
    assert "secret" not in slack.shown


@pytest.mark.parametrize(("settings", "message"), [
    ({"urls": ["nosuchservice://x"]},
     "[approval.notify] urls[0]: nosuchservice:// is not a notification URL Apprise can use"),
    ({"urls": ["json://127.0.0.1:9/h"], "signing_key": "${NOT_SET_ANYWHERE}"},
     "[approval.notify] signing_key names ${NOT_SET_ANYWHERE}, which is not set"),
    ({"urls": ["json://127.0.0.1:9/h"], "signing_key": "short"},
     "a JSON webhook is signed with a key of at least 16 characters"),
    ({"routes": [{"urls": ["ntfy://x/${NO_SUCH_TOPIC}"]}]},
     "[[approval.notify.routes]] 1: urls[0] names ${NO_SUCH_TOPIC}"),
])
def test_a_channel_that_cannot_work_is_refused_naming_its_entry(settings: dict[str, object],
                                                                message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Router(NotifySection.model_validate(settings))
    assert message in str(refused.value)


def test_durations_read_as_seconds_or_text(tmp_path: Path) -> None:
    assert [parse_duration(v) for v in ("90s", "15m", "2h", "1h30m", 45)] == [
        90.0, 900.0, 7200.0, 5400.0, 45]
    config = tmp_path / "toolkeeper.toml"
    config.write_text('[approval.notify]\nurls = ["ntfy://x/y"]\nremind_after = "soon"\n')
    with pytest.raises(ConfigError, match=r"toolkeeper.toml:3: approval.notify.remind_after: "
                                          r"Value error, 'soon' is not a duration"):
        load_config(config)
    config.write_text('[approval.notify]\nurls = ["ntfy://x/y"]\nescalate_after = "1h"\n')
    with pytest.raises(ConfigError, match="escalate_after needs escalate_urls"):
        load_config(config)


def test_without_a_notify_section_nothing_is_sent() -> None:
    assert not ToolkeeperConfig().approval.notify.enabled
    assert ToolkeeperConfig().approval.notify.direct_decisions is False
