"""A desktop client's MCP config file, read and written through directory fds, never through a
symlink.

A cloned repository can ship ``.vscode`` as a symlink to the user's global settings folder, or
``.vscode/mcp.json`` as a symlink to another program's JSON: following it would turn a project
install into a global one, or merge toolkeeper's entry into a file that is not the client's. So
the directories from ``base`` down and the file itself are opened one name at a time with
``O_NOFOLLOW`` (a symlink is refused, naming it), missing directories are made the same way, and
the new file is written beside the old one in the opened directory and renamed over it.
"""

from __future__ import annotations

import os
import secrets
import stat
from contextlib import suppress
from pathlib import Path

from ..errors import ConfigError

__all__ = ["ConfigTarget"]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class ConfigTarget:
    """The file ``rel`` below the directory ``base`` (``base`` itself is opened as given; no
    symlink is followed below it)."""

    def __init__(self, base: Path, rel: str) -> None:
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if not parts or ".." in parts:
            raise ConfigError(f"{rel!r} does not name a file below {base}")
        self.base, self.parts = base, parts
        self.path = base.joinpath(*parts)

    @classmethod
    def at(cls, path: Path, project: Path | None = None) -> ConfigTarget:
        """The target for ``path``: below ``project`` when it is there (a project's file: no
        symlink from the project down), else below the nearest directory of it that exists
        (the file itself, and the directories made for it, are no symlinks)."""
        if project is not None:
            try:
                return cls(project, path.relative_to(project).as_posix())
            except ValueError:
                pass
        base = path.parent
        while not base.is_dir() and base != base.parent:
            base = base.parent
        return cls(base, path.relative_to(base).as_posix())

    def _refuse(self, part: str, why: str) -> ConfigError:
        return ConfigError(
            f"refusing {self.path}: {part} {why} (a cloned repository can point it at another "
            "program's file, or make a project install a global one); replace it with a real "
            "file or directory, or pass --config-path FILE")

    def _open_dir(self, *, create: bool) -> int | None:
        """The file's directory, opened through no symlink (made when ``create``); ``None``
        when it does not exist and is not to be made."""
        fd = os.open(self.base, _DIR & ~os.O_NOFOLLOW)
        walked = self.base
        try:
            for part in self.parts[:-1]:
                walked = walked / part
                if create:
                    with suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                try:
                    step = os.open(part, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    os.close(fd)
                    return None
                except OSError as exc:
                    raise self._refuse(str(walked), _why(fd, part, exc)) from None
                os.close(fd)
                fd = step
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read_text(self) -> tuple[str, int | None]:
        """The file's text ("" when it does not exist) and its permission bits."""
        dirfd = self._open_dir(create=False)
        if dirfd is None:
            return "", None
        try:
            try:
                fd = os.open(self.parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                             | os.O_CLOEXEC, dir_fd=dirfd)
            except FileNotFoundError:
                return "", None
            except OSError as exc:
                raise self._refuse(str(self.path), _why(dirfd, self.parts[-1], exc)) from None
        finally:
            os.close(dirfd)
        with os.fdopen(fd, "rb") as stream:
            info = os.fstat(stream.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise self._refuse(str(self.path), "is not a regular file")
            return stream.read().decode("utf-8"), stat.S_IMODE(info.st_mode)

    def write(self, text: str, *, mode: int) -> None:
        """Replace (or create) the file with ``text``: a temporary file in the opened
        directory, ``mode`` set on it, renamed over the old one."""
        dirfd = self._open_dir(create=True)
        assert dirfd is not None
        name = self.parts[-1]
        temp = f".{name}.{secrets.token_hex(6)}"
        try:
            existing = _lstat(dirfd, name)
            if existing is not None and not stat.S_ISREG(existing.st_mode):
                raise self._refuse(str(self.path), _kind(existing))
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=dirfd)
            try:
                with os.fdopen(fd, "wb") as stream:
                    os.fchmod(stream.fileno(), mode)
                    stream.write(text.encode("utf-8"))
                    stream.flush()
                    os.fsync(stream.fileno())
                os.rename(temp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
            except BaseException:
                with suppress(OSError):
                    os.unlink(temp, dir_fd=dirfd)
                raise
        finally:
            os.close(dirfd)


def _lstat(dirfd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _kind(info: os.stat_result) -> str:
    return "is a symbolic link" if stat.S_ISLNK(info.st_mode) else "is not a regular file"


def _why(dirfd: int, name: str, exc: OSError) -> str:
    info = _lstat(dirfd, name)
    if info is not None and stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    return f"cannot be opened ({exc.strerror or exc})"
