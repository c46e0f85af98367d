"""Copy-on-write views of mounted directories: overlayfs in the sandbox's own namespaces.

bubblewrap 0.8 has no overlay options, but an unprivileged user may mount an overlay in a user
and mount namespace of their own (Linux 5.11 and later). So a run that writes a workspace starts
as ``unshare --user --map-root-user --mount`` → ``sh`` (mount the workspace read-through, with a
private upper layer) → ``bwrap`` (which binds the overlay's view where the workspace goes and
runs the command as the same uid as ever, ``--uid``/``--gid``). The command reads the workspace
as it is; everything it changes lands in the upper layer, outside the workspace, and the host
decides what of it to apply (``builtins.overlay``): a protected path the command creates is never
in the workspace, not even while the command runs.

The private directory of a view is made by the host: ``0711`` (the sandbox's unprivileged uid
passes through when the host is root), its four directories the sandbox uid's own, ``0700``.
A workspace whose path has a character overlayfs's options cannot carry (``,``, ``:``, a space…)
is bound below it first (``--rbind``), so only plain paths reach the mount options.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .base import SYSTEM_PATH, UNPRIVILEGED_UID, Overlay

__all__ = ["launcher", "new_overlay", "probe_overlay", "remove_overlay", "sandbox_ids"]

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-")
# Mounts each (how, directory, private root) triple named after the count, then becomes the rest:
# "bind" binds the directory below the private root first (its path cannot go into overlayfs's
# options), "direct" names it in them.
_MOUNT = ('n=$1; shift; while [ "$n" -gt 0 ]; do low=$2; '
          'if [ "$1" = bind ]; then mount --rbind "$2" "$3/lower" || exit 125; low="$3/lower"; '
          'fi; mount -t overlay overlay -o "lowerdir=$low,upperdir=$3/upper,workdir=$3/work,'
          'userxattr" "$3/view" || exit 125; shift 3; n=$((n - 1)); done; exec "$@"')


def sandbox_ids() -> tuple[int, int]:
    """The uid and gid commands run as: the host's, or the unprivileged one for a root host."""
    if os.geteuid() == 0:
        return UNPRIVILEGED_UID, UNPRIVILEGED_UID
    return os.geteuid(), os.getegid()


def new_overlay(parent: str | Path | None = None) -> Overlay:
    """A fresh private directory for one view, under ``parent`` (default: the temporary
    directory; put it on the workspace's filesystem and applying is a rename).

    Raises:
        OSError: it could not be made, or its path has a character overlayfs's options
            cannot carry (``,``, ``:``, ``\\``, spaces…): set TMPDIR to a plain path.
    """
    root = Path(tempfile.mkdtemp(prefix="toolkeeper-overlay-", dir=parent))
    try:
        if not set(str(root)) <= _SAFE:
            raise OSError(f"the overlay directory {root} has characters overlayfs options "
                          "cannot carry; set TMPDIR to a plain path")
        os.chmod(root, 0o711)
        uid, gid = sandbox_ids()
        overlay = Overlay(root)
        for path in (overlay.upper, overlay.work, overlay.lower, overlay.view):
            path.mkdir(mode=0o700)
            if os.geteuid() == 0:
                os.chown(path, uid, gid)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return overlay


def remove_overlay(overlay: Overlay) -> None:
    """Remove a view's private directory with whatever is left in it (never following a
    symlink the command left in its upper layer); overlayfs leaves ``work/work`` unreadable
    to its owner, so it is opened up first."""
    inner = overlay.work / "work"
    with contextlib.suppress(OSError):
        os.chmod(inner, 0o700, follow_symlinks=False)
    shutil.rmtree(overlay.root, ignore_errors=True)


def launcher(views: Sequence[tuple[Path, Overlay]]) -> list[str]:
    """The command-line prefix that mounts each (directory, view) pair, then runs what follows
    (``bwrap …``) in the same namespaces."""
    unshare = shutil.which("unshare", path=SYSTEM_PATH) or "unshare"
    argv = [unshare, "--user", "--map-root-user", "--mount", "--", "/bin/sh", "-c", _MOUNT, "sh",
            str(len(views))]
    for directory, overlay in views:
        how = "direct" if set(str(directory)) <= _SAFE else "bind"
        argv += [how, str(directory), str(overlay.root)]
    return argv


@functools.lru_cache(maxsize=1)
def probe_overlay() -> str | None:
    """Why a copy-on-write view cannot be made here (``None`` when it can): util-linux's
    ``unshare`` and ``mount`` are needed, and a kernel that lets a user namespace mount
    overlayfs."""
    if shutil.which("unshare", path=SYSTEM_PATH) is None:
        return "util-linux's unshare is not installed"
    setpriv = shutil.which("setpriv", path=SYSTEM_PATH)
    drop = [setpriv, f"--reuid={UNPRIVILEGED_UID}", f"--regid={UNPRIVILEGED_UID}",
            "--clear-groups", "--"] if os.geteuid() == 0 and setpriv else []
    with tempfile.TemporaryDirectory() as lower:
        os.chmod(lower, 0o755)
        overlay = new_overlay()
        try:
            argv = [*drop, *launcher([(Path(lower), overlay)]), "/bin/true"]
            result = subprocess.run(argv, capture_output=True, text=True, timeout=10,
                                    check=False, env={"PATH": SYSTEM_PATH})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        finally:
            remove_overlay(overlay)
    return None if result.returncode == 0 else (result.stderr.strip() or "mount failed")[:300]
