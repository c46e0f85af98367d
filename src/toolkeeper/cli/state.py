"""Where ``toolkeeper serve`` keeps its state, and the rule that keeps it out of every tool's
reach.

The state directory holds the credentials (the operator token, the default client token, the
page's sessions) and the stores (approvals, audit). A tool that could read it could approve its
own calls — whichever server's it is — so no workspace holds a state directory, is one, or is
inside one: the tools refuse every path through one they meet (``builtins.state_dirs``), and
``serve`` and ``install`` refuse such a workspace outright, naming the folder. It is made
owner-only (the directory 0700, its files 0600) and gets the marker every state folder carries,
so it is recognised wherever it is.

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
from ..builtins.policy import SecurityPolicy
from ..builtins.scan import Scanner
from ..builtins.state_dirs import enclosing_state_dir, mark_state_dir
from ..errors import ConfigError

__all__ = ["default_state_dir", "no_state_in", "out_of_reach", "secure_state_dir"]

SERVER_FILE = "server.json"
"""What a running ``toolkeeper serve`` writes in its state dir (url, pid, started_at), for the
commands that need to name it (``toolkeeper approvals login-url``)."""


def out_of_reach(state_dir: Path, reaches: Iterable[tuple[str, Path]]) -> None:
    """Refuse a state directory that a tool could reach: the same as, inside, or around one of
    ``reaches`` (what each is, the directory).

    Raises:
        ConfigError: naming the directory, what reaches it, and how to move it.
    """
    state = state_dir.expanduser().resolve()
    for what, where in reaches:
        root = where.expanduser().resolve()
        if state == root or root in state.parents or state in root.parents:
            place = "the same as" if state == root else (
                "inside" if root in state.parents else "around")
            raise ConfigError(
                f"the state dir {state} is {place} the {what} {root}: tools could read its "
                f"tokens and approve their own calls. Keep the two apart: --state-dir DIR keeps the "
                f"state elsewhere (the default is {default_state_dir()}), or --workspace DIR "
                f"gives the tools another {what} (the default is the config's [security] "
                f"workspace, else the current directory)")


def no_state_in(workspace: Path, what: str = "workspace") -> None:
    """Refuse a directory tools reach that is, is inside, or holds a toolkeeper state folder
    (any server's: recognised by what it holds), naming the folder.

    Raises:
        ConfigError: naming the state folder and what to do.
    """
    root = workspace.expanduser().resolve()
    around = enclosing_state_dir(root)
    if around is not None:
        raise ConfigError(
            f"the {what} {root} is {'' if around[0] == root else 'inside '}a toolkeeper state "
            f"folder ({around[0]} holds {around[1]!r}): tools could read its tokens and "
            f"approve their own calls. Use a {what} outside every state folder (--workspace DIR, "
            f"or [security] workspace in the config)")
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return  # a workspace that does not exist is refused where it is used, with its reason
    try:
        found = Scanner(SecurityPolicy(workspace=root), state_only=True).scan(fd).found
    finally:
        os.close(fd)
    if found:
        names = ", ".join(str(root / f.rel) for f in found[:3]) + (" …" if len(found) > 3 else "")
        raise ConfigError(
            f"the {what} {root} holds toolkeeper state ({names}): tools could read its tokens "
            f"and approve their own calls. Move that state folder out of the {what} (or stop "
            f"the server using it and delete it), or use another {what} (--workspace DIR, or "
            f"[security] workspace in the config)")


def secure_state_dir(state_dir: Path) -> None:
    """Make ``state_dir`` (owner-only, 0700, with the state marker) and tighten what is
    already in it (files 0600): an earlier version created the database 0644.

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
        os.chmod(state_dir, 0o700)
        mark_state_dir(state_dir)
        with os.scandir(state_dir) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    os.chmod(entry.path, stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode)
                             & 0o600)
    except OSError as exc:
        raise ConfigError(f"cannot use the state dir {state_dir}: {exc.strerror or exc}; pass "
                          "--state-dir DIR (a directory you own)") from exc
