"""``toolkeeper serve``'s settings: the command line over the config, merged once.

Two frozen values, one job each:

- ``ServeFlags`` is the command line as typed. Every choice and range is declared on its field
  (``auth`` is ``"token"`` or ``"none"``, a port is 0 to 65535, ``--approval-wait`` stays below
  the call's time limit), and so are the rules between flags (``--auth none`` only on loopback,
  ``--metrics-port`` only over HTTP); a value that breaks one is refused in one line naming the
  flag and what it must be.
- ``ServeSettings`` is what serves: the flags, the config they were given (loaded once), and the
  values where a flag wins over the config — the workspace, the store, the artifact store, the
  OAuth settings — resolved here and nowhere else.

As FastMCP's ``run`` merges its flags over ``fastmcp.json``: a flag given wins, else the
config's value, else the default. Both values pickle, so a worker process can be handed them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails

from ..approval.pg import is_url
from ..approval.where import default_state_dir
from ..config import ToolkeeperConfig, load_config
from ..config.model import OAuthSection
from ..errors import ConfigError
from ..invoke.policy import ChainPolicy
from ..server.gate import LOOPBACK
from ..server.oauth import oauth_settings

__all__ = ["SERVER_POLICY", "ServeFlags", "ServeSettings", "serve_settings"]

SERVER_POLICY = ChainPolicy(max_tool_calls=10**9, total_timeout_s=10.0**9)
"""One session spans the server's life: its budget and total time must not run out under it."""

ARTIFACTS_DIR = "artifacts"
"""The artifact store's directory in the state dir, by default."""

M = TypeVar("M", bound=BaseModel)
Port = Annotated[int, Field(ge=0, le=65535, description="a port from 0 to 65535")]


class ServeFlags(BaseModel):
    """``toolkeeper serve``'s command line, as typed (``None``: not given)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    targets: tuple[str, ...] = ()
    config: Path | None = None
    stdio: bool = False
    host: str = "127.0.0.1"
    port: Port = 8765
    state_dir: Path | None = None
    workspace: Path | None = None
    no_builtins: bool = False
    auth: Literal["token", "none"] = Field("token", description="'token' or 'none'")
    rate_limit: float = Field(50.0, ge=0, description=(
        "a number of requests per second, or 0 for no limit"))
    public_host: tuple[str, ...] = ()
    store: str | None = Field(None, pattern=r"^postgres(ql)?://", description=(
        "a postgresql:// URL (SQLite lives in --state-dir)"))
    approval_wait: float = Field(30.0, ge=0, lt=SERVER_POLICY.approval_timeout_s, description=(
        f"0 or more and under {SERVER_POLICY.approval_timeout_s:g} s (the call's time limit)"))
    approval_ttl: float = Field(3600.0, gt=0, description="a positive number of seconds")
    keep_sessions: bool = False
    tool_search: bool = False
    oauth_issuer: str | None = None
    oauth_resource: str | None = None
    oauth_audience: tuple[str, ...] = ()
    oauth_jwks_url: str | None = None
    metrics_port: Port | None = Field(None, description="a port from 0 to 65535")
    artifacts: str | None = None
    workers: int = Field(1, ge=1, le=1024, description=(
        "a number of processes from 1 to 1024, or 'auto' (one per core; one over --stdio)"))
    workers_auto: bool = False
    """``--workers auto`` was given (the config may still make it one process)."""

    @model_validator(mode="before")
    @classmethod
    def _cores(cls, given: object) -> object:
        """``auto``: as many workers as make sense — one per core this process may run on
        over HTTP, one where a flag needs one process (``--stdio``: one client owns one
        process; ``--tool-search``, ``--metrics-port``, ``--artifacts DIR``), so that a
        configuration written with ``auto`` starts on every machine, whatever its cores."""
        if not isinstance(given, dict) or given.get("workers") != "auto":
            return given
        artifacts = given.get("artifacts")
        alone = bool(given.get("stdio") or given.get("tool_search")
                     or given.get("metrics_port") is not None
                     or (isinstance(artifacts, str) and _names_a_directory(artifacts)))
        return {**given, "workers_auto": True,
                "workers": 1 if alone else len(os.sched_getaffinity(0))}

    @model_validator(mode="after")
    def _rules_between_flags(self) -> ServeFlags:
        if self.auth == "none" and self.host not in LOOPBACK:
            raise ValueError(f"--auth none is refused on {self.host}: without a token, listen "
                             "on 127.0.0.1 only")
        if self.metrics_port is not None and self.stdio:
            raise ValueError("--metrics-port must be a port from 0 to 65535, and serving over "
                             "HTTP (not with --stdio)")
        if self.workers > 1:
            _one_worker_only(self)
        return self


def _names_a_directory(artifacts: str) -> bool:
    """Whether ``--artifacts`` names a directory (not ``off``, a database or a bucket)."""
    return artifacts != "off" and "://" not in artifacts


def _one_worker_only(flags: ServeFlags) -> None:
    """What several workers cannot share (``--workers N`` with N > 1): refused in one line."""
    if flags.stdio:
        raise ValueError("--workers serves HTTP from several processes on one port; over "
                         "--stdio one client owns one process: drop --workers")
    if flags.metrics_port is not None:
        raise ValueError("--metrics-port would count one worker's requests only: with "
                         "--workers N read /metrics on the main port (each answer is the "
                         "answering worker's), or serve with --workers 1")


class ServeSettings(BaseModel):
    """What ``toolkeeper serve`` serves with: the flags and the config merged (``merge``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    flags: ServeFlags
    config: ToolkeeperConfig | None
    """The config as loaded, its ``[security] workspace`` the one in force."""
    state_dir: Path
    workspace: Path
    workspace_from: str
    """Where the workspace came from (``--workspace``, the config, the current directory)."""
    store: str | None
    """The ``postgresql://`` store replicas share (``--store`` over the config's), or ``None``:
    SQLite in the state dir."""
    artifact_dir: Path | None
    """The directory large results are offloaded to (``--artifacts`` over ``[server]``),
    ``None``: off, or in ``artifact_url``."""
    artifact_url: str | None = None
    """The database (``postgresql://``) or bucket (``s3://``) they are offloaded to instead,
    shared by replicas: ``--artifacts URL`` over
    ``[server] artifact_store`` over the ``postgresql://`` store (unless a directory is given)."""
    artifact_ttl_s: float
    oauth: OAuthSection | None
    """``--oauth-*`` over ``[server.oauth]``; ``None`` when neither asks for OAuth."""
    worker: int = 0
    """Which of ``--workers`` this process is (1 to N), handed to it by the supervisor; 0:
    the only process."""
    tool_search: bool = False
    """``--tool-search`` or ``[server] tool_search``: ``tools/list`` offers the search tool
    and what each client loaded."""

    @model_validator(mode="after")
    def _rules_of_the_whole(self) -> ServeSettings:
        if self.oauth is not None and (self.flags.stdio or self.flags.auth == "none"):
            raise ValueError("OAuth access tokens are for HTTP clients that authenticate: drop "
                             "--stdio and --auth none, or the OAuth settings")
        passed = self.config.security.shell_env_passthrough if self.config is not None else []
        leaked = [name for name in passed if name.upper().startswith("TOOLKEEPER_")]
        if leaked:
            raise ValueError(f"[security] shell_env_passthrough names {', '.join(leaked)}: "
                             "toolkeeper's own credentials never reach a command; remove them")
        if self.tool_search and not (self.flags.stdio or self.flags.keep_sessions):
            raise ValueError("--tool-search ([server] tool_search) needs --sessions over HTTP (or "
                             "--stdio): the tools a "
                             "client loaded are kept with its connection, which stateless HTTP "
                             "does not keep, and its client could not be told its list changed")
        if self.tool_search and self.flags.workers > 1:
            raise ValueError("--tool-search ([server] tool_search) keeps the tools each client "
                             "loaded in one process's memory, and with --workers N another "
                             "worker may answer its next tools/list: serve it with --workers 1")
        return self

    @property
    def db(self) -> str | Path:
        """Where approvals, audit, tokens and pins live: the shared store, else the state
        dir's SQLite file."""
        return self.store if self.store is not None else self.state_dir / "toolkeeper.db"

    @property
    def served(self) -> bool:
        """Whether tools reach the workspace: the built-ins, or code mode with a mount."""
        config = self.config
        return not self.flags.no_builtins or bool(
            config is not None and config.codemode.enabled and config.codemode.workspace != "none")

    @property
    def ask_client(self) -> bool:
        """``[approval] channels`` has ``client``: a call's client is asked to approve too."""
        return self.config is not None and "client" in self.config.approval.channels

    @classmethod
    def merge(cls, flags: ServeFlags) -> ServeSettings:
        """The config ``flags`` name, loaded once, with every flag given winning over it.

        Raises:
            ConfigError: the config cannot be read, or a merged value is wrong (one line).
        """
        config = load_config(flags.config) if flags.config is not None else None
        config, workspace, where = _workspace(config, flags.workspace)
        state_dir = flags.state_dir if flags.state_dir is not None else default_state_dir()
        server = config.server if config is not None else None
        if flags.workers_auto and flags.workers > 1 and server is not None and (
                server.tool_search or (server.artifact_dir is not None and server.artifacts
                                       and server.artifact_store is None
                                       and flags.artifacts is None)):
            flags = flags.model_copy(update={"workers": 1})  # auto: what the config needs
        oauth = oauth_settings(server.oauth if server is not None else None,
                               issuer=flags.oauth_issuer, resource=flags.oauth_resource,
                               jwks_url=flags.oauth_jwks_url, audience=list(flags.oauth_audience))
        return _validated(cls, {
            "flags": flags, "config": config, "state_dir": state_dir, "workspace": workspace,
            "workspace_from": where, "oauth": oauth,
            "store": flags.store or (config.store if config is not None else None),
            "artifact_url": _artifact_url(flags, config),
            "artifact_dir": _artifact_dir(flags, config, state_dir),
            "tool_search": flags.tool_search or bool(server is not None and server.tool_search),
            "artifact_ttl_s": server.artifact_ttl_s if server is not None else 86400.0})


def serve_settings(options: Mapping[str, object]) -> ServeSettings:
    """The settings of the command line ``options`` (the command's parameters by name).

    Raises:
        ConfigError: one line naming the flag (or the config entry) and what it must be.
    """
    return ServeSettings.merge(_validated(ServeFlags, options))


def _validated(model: type[M], values: Mapping[str, object]) -> M:
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        raise ConfigError(_one_line(model, exc.errors(include_url=False))) from None


def _one_line(model: type[BaseModel], errors: list[ErrorDetails]) -> str:
    """A refusal as the operator reads it: the flag, what it must be, what it got."""
    error = errors[0]
    where = error["loc"][0] if error["loc"] else None
    if where is None:  # a rule between values: its own message
        return str(error["msg"]).removeprefix("Value error, ")
    field = model.model_fields.get(str(where))
    flag = "--" + str(where).replace("_", "-")
    wanted = field.description if field is not None and field.description else error["msg"]
    return f"{flag} must be {wanted} (got {error.get('input')!r})"


def _workspace(config: ToolkeeperConfig | None, given: Path | None
               ) -> tuple[ToolkeeperConfig | None, Path, str]:
    """(the config with the workspace in force, the workspace, where it came from):
    ``--workspace``, else the config's ``[security] workspace`` (relative to the config's
    directory), else the current directory."""
    if given is not None:
        ws = given.expanduser().resolve()
        if config is not None:
            config = config.model_copy(update={"security": config.security.model_copy(
                update={"workspace": ws})})
        return config, ws, "--workspace"
    if config is not None:
        return config, config.security.workspace.resolve(), "the config's [security]"
    return None, Path.cwd().resolve(), "the current directory"


def _artifacts_off(given: str | None, config: ToolkeeperConfig | None) -> bool:
    server = config.server if config is not None else None
    return given == "off" or (given is None and server is not None and not server.artifacts)


def _artifact_url(flags: ServeFlags, config: ToolkeeperConfig | None) -> str | None:
    """``--artifacts postgresql://…`` over ``[server] artifact_store`` over the
    ``postgresql://`` store, unless a directory is named (``--artifacts DIR`` or ``[server]
    artifact_dir``) or the store is off."""
    given, server = flags.artifacts, (config.server if config is not None else None)
    if _artifacts_off(given, config):
        return None
    if given is not None:
        if is_url(given) or given.startswith("s3://"):
            return given
        if "://" in given:
            raise ConfigError(f"--artifacts {given}: toolkeeper keeps large results in a "
                              "directory (--artifacts DIR), a postgresql:// database or an "
                              "s3://bucket/prefix, or sends them inline (--artifacts off)")
        return None
    if server is not None and server.artifact_store is not None:
        return server.artifact_store
    if server is not None and server.artifact_dir is not None:
        return None
    store = flags.store or (config.store if config is not None else None)
    return store if store is not None and is_url(store) else None


def _artifact_dir(flags: ServeFlags, config: ToolkeeperConfig | None, state_dir: Path
                  ) -> Path | None:
    """``--artifacts`` (a directory, or ``off``) over ``[server] artifacts``/``artifact_dir``
    over ``artifacts/`` in the state dir; ``None`` when off or in a database. With several
    workers a directory is none by default (results sent whole), and one asked for is refused:
    which artifacts a client may read is kept by the worker that answered its call, and its
    read may reach another."""
    given, server = flags.artifacts, (config.server if config is not None else None)
    if _artifacts_off(given, config) or _artifact_url(flags, config) is not None:
        return None
    if flags.workers > 1:
        if given is not None or (server is not None and server.artifact_dir is not None):
            raise ConfigError("--workers N sends large results whole unless they are kept in "
                              "PostgreSQL or a bucket: drop --artifacts DIR (or [server] "
                              "artifact_dir), name a postgresql:// or s3:// store, or serve "
                              "with --workers 1")
        return None
    root = Path(given) if given else (server.artifact_dir if server is not None else None) \
        or state_dir / ARTIFACTS_DIR
    return root.expanduser().resolve()
