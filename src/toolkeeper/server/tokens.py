"""The operator token: from ``TOOLKEEPER_TOKEN``, else generated once (256 bits) and kept in the
state directory, readable by its owner only."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["operator_token"]

TOKEN_FILE = "token"


def operator_token(state_dir: Path) -> tuple[str, str]:
    """(the token, where it came from: ``env``, ``stored`` or ``new``). ``TOOLKEEPER_TOKEN``
    wins over the stored one."""
    given = os.environ.get("TOOLKEEPER_TOKEN", "").strip()
    if given:
        return given, "env"
    path = state_dir / TOKEN_FILE
    try:
        stored = path.read_text().strip()
    except FileNotFoundError:
        stored = ""
    if stored:
        return stored, "stored"
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    return token, "new"
