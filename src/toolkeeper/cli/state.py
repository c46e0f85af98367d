"""Where ``toolkeeper serve`` keeps its state, and the rule that keeps it out of every tool's
reach.

The state directory holds the credentials (the operator token, the default client token, the
page's sessions) and the stores (approvals, audit). A tool that could read it could approve its
own calls, so it must not be, or be inside, any directory a tool reaches: the workspace, the
read-only roots, the code-mode mount. (A workspace *inside* the state directory is fine: confined
tools cannot climb out of their workspace.) It is made owner-only: the directory 0700 (0711 when
a workspace lives inside it, so a sandbox's unprivileged uid can pass through), its files 0600.

By default it is the per-user state directory (``$XDG_STATE_HOME/toolkeeper``, else
``~/.local/state/toolkeeper``), never the current directory: a desktop client starts servers from
wherever it likes (``/`` included).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from ..approval.where import default_state_dir
from ..errors import ConfigError

__all__ = ["default_state_dir", "out_of_reach", "secure_state_dir"]

SERVER_FILE = "server.json"
"""What a running ``toolkeeper serve`` writes in its state dir (url, pid, started_at), for the
commands that need to name it (``toolkeeper approvals login-url``)."""


def out_of_reach(state_dir: Path, reaches: Iterable[tuple[str, Path]]) -> None:
    """Refuse a state directory that a tool could read: the same as, or inside, one of
    ``reaches`` (what each is, the directory).

    Raises:
        ConfigError: naming the directory, what reaches it, and how to move it.
    """
    state = state_dir.expanduser().resolve()
    for what, where in reaches:
        root = where.expanduser().resolve()
        if state == root or root in state.parents:
            raise ConfigError(
                f"the state dir {state} is inside the {what} {root}: tools could read its "
                f"tokens and approve their own calls. Keep it outside (--state-dir "
                f"{default_state_dir()} is the default), or put the {what} inside the state "
                "dir instead")


def secure_state_dir(state_dir: Path, *, traversable: bool = False) -> None:
    """Make ``state_dir`` (owner-only, 0700) and tighten what is already in it (files 0600):
    an earlier version created the database 0644. ``traversable`` (a workspace lives inside
    it, and commands run as another uid when toolkeeper runs as root) makes the directory 0711:
    others may pass through to the workspace, never list it or read its files.

    Raises:
        ConfigError: it is not a directory, or it belongs to another user.
    """
    try:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = state_dir.lstat()
        if not stat.S_ISDIR(info.st_mode):
            raise ConfigError(f"the state dir {state_dir} is not a directory (a symlink or a "
                              "file is refused); pass --state-dir DIR")
        if info.st_uid != os.geteuid():
            raise ConfigError(f"the state dir {state_dir} belongs to another user (uid "
                              f"{info.st_uid}); pass a --state-dir of your own")
        os.chmod(state_dir, 0o711 if traversable else 0o700)
        with os.scandir(state_dir) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    os.chmod(entry.path, stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode)
                             & 0o600)
    except OSError as exc:
        raise ConfigError(f"cannot use the state dir {state_dir}: {exc.strerror or exc}; pass "
                          "--state-dir DIR (a directory you own)") from exc
