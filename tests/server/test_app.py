"""``create_app``, embedded: the key ``requestState`` is sealed under is shared through the store
by every app on it, and is never the operator token (a client holds every sealed state)."""

from __future__ import annotations

from pathlib import Path

from toolkeeper import ToolInvoker
from toolkeeper.server.app import create_app
from toolkeeper.server.auth import WebSessions
from toolkeeper.server.tokens import shared_state_key

TOKEN = "operator-token-0123456789"


def test_embedded_apps_on_one_store_seal_request_state_under_its_key_not_the_token(
        tmp_path: Path) -> None:
    store = tmp_path / "toolkeeper.db"
    apps = [create_app(ToolInvoker([]), token=TOKEN, sessions=WebSessions(store),
                       ask_client=True) for _ in range(2)]
    keys = {app.face.state_secret for app in apps}
    assert keys == {shared_state_key(store)} and TOKEN not in keys
    alone = create_app(ToolInvoker([]), token=TOKEN, ask_client=True)
    assert alone.face.state_secret not in (None, TOKEN, *keys)
