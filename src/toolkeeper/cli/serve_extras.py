"""What ``toolkeeper serve`` needs installed for the way it is asked to run, said once.

Serve's parts come from several extras (the server, the built-in tools, a PostgreSQL store,
OAuth, skills, Cedar policies). Checking them one at a time, as each part is built, showed a
person one "needs the extra" line, then the next after they installed it, and the next: three
installs for one start. Here the options and the config are read up front, every extra that is
missing is named, and the one install line that brings them all is printed before anything
starts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..config import ToolkeeperConfig, load_config
from ..errors import ToolkeeperError
from ..extras import MissingExtraError, installed

__all__ = ["ServeAsks", "install_line", "missing_extras", "needed_extras"]


@dataclass(frozen=True, kw_only=True)
class ServeAsks:
    """The options of one ``serve`` that decide which extras it needs."""

    config: Path | None = None
    builtins: bool = True
    store: str | None = None
    oauth: bool = False
    """An ``--oauth-*`` option was given."""


def needed_extras(asks: ServeAsks) -> dict[str, str]:
    """Every extra this ``serve`` needs, each with what it is for, in install order. A config
    that does not load adds nothing: serve reports its error itself, in its own words."""
    settings = _settings(asks.config)
    needed = {"server": "the server"}
    if asks.builtins:
        needed["builtins"] = "the built-in tools; --no-builtins serves without"
    store = asks.store or (settings.store if settings else None)
    if store and store.startswith(("postgresql://", "postgres://")):
        needed["postgres"] = "the postgresql:// store"
    if asks.oauth or (settings is not None and settings.server.oauth is not None):
        needed["oauth"] = "OAuth access tokens"
    elif settings is not None and any(s.oauth for s in settings.mcp.servers):
        needed["oauth"] = "OAuth to upstream MCP servers"
    if settings is not None and settings.skills.dir is not None:
        needed["skills"] = "the config's skills"
    if settings is not None and _has_cedar(settings.policy_dir()):
        needed["policy"] = "the Cedar policies in " + str(settings.policy_dir())
    return needed


def missing_extras(asks: ServeAsks) -> MissingExtraError | None:
    """The one error naming every extra this ``serve`` needs and lacks, or ``None``."""
    needed = needed_extras(asks)
    absent = [extra for extra in needed if not installed(extra)]
    if not absent:
        return None
    names = [f"[{extra}]" for extra in absent]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    noun = "extra" if len(names) == 1 else "extras"
    why = "; ".join(needed[extra] for extra in absent)
    return MissingExtraError(",".join(absent), "toolkeeper serve",
                             f"toolkeeper serve needs the {listed} {noun} ({why}): "
                             f"{install_line(absent)}")


def install_line(extras: Iterable[str]) -> str:
    """The pip command that installs ``extras`` (quoted for a shell)."""
    return f"pip install 'toolkeeper[{','.join(extras)}]'"


def _settings(config: Path | None) -> ToolkeeperConfig | None:
    if config is None:
        return None
    try:
        return load_config(config)
    except (ToolkeeperError, OSError):
        return None


def _has_cedar(directory: Path | None) -> bool:
    try:
        return directory is not None and any(directory.glob("*.cedar"))
    except OSError:
        return False
