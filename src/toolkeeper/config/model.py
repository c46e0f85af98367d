"""The TOML configuration (``toolkeeper.toml``), modelled with pydantic."""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..core.risk import HitlMode, ToolRisk
from ..errors import ConfigError
from .codemode import CodeModeSection
from .hosts import Network
from .lines import line_of, section_line
from .notify import NotifySection
from .upstream_auth import UpstreamOAuth

__all__ = ["ASYMMETRIC_ALGORITHMS", "ApprovalSection", "CodeModeSection", "MCPSection",
           "MCPServerConfig", "OAuthSection", "PolicySection", "ServerSection", "ToolkeeperConfig",
           "load_config"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SecuritySection(_Section):
    workspace: Path = Path(".")
    autonomy: Literal["read_only", "supervised", "full"] = "supervised"
    allowed_commands: list[str] | None = None
    forbidden_paths: list[str] | None = None
    """Replaces the default list when given; ``extra_forbidden_paths`` adds to it."""
    extra_forbidden_paths: list[str] = Field(default_factory=list)
    shell_env_passthrough: list[str] = Field(default_factory=list)
    network: bool = False
    allowed_domains: list[str] = Field(default_factory=list)
    allow_unconfined: bool = False
    max_output_bytes: int = 1 << 20
    max_memory_mb: int = Field(default=2048, gt=0)
    """Memory of one command (a cgroup limit where the host allows it, else address space)."""
    max_audit_rows: int = Field(default=10_000, ge=1)
    """Audit rows one session (a client's, a code-mode run's) writes before its refused calls
    are counted instead (``ChainPolicy.max_audit_rows``)."""


class ShellSection(_Section):
    timeout_secs: float = 60.0


class FetchSection(_Section):
    enabled: bool = False
    allowed_domains: list[str] = Field(default_factory=list)


class WebSearchSection(_Section):
    """``[web_search]``: ``web_search_tool`` through a search provider's API (Brave)."""

    enabled: bool = False
    provider: Literal["brave"] = "brave"
    api_key: str | None = None
    """The provider's key; else the ``BRAVE_API_KEY`` environment variable."""
    base_url: str = Field(default="https://api.search.brave.com/res/v1", pattern=r"^https?://")
    """The provider's API root (the operator's choice, so not held to the fetch rules)."""
    max_results: int = Field(default=5, ge=1, le=20)
    timeout_secs: float = Field(default=15.0, gt=0)


class TextBrowserSection(_Section):
    """``[text_browser]``: pages as readable text with numbered links, under the fetch rules."""

    enabled: bool = False
    allowed_domains: list[str] = Field(default_factory=list)


class BrowserSection(_Section):
    """``[browser]``: ``browser`` and ``browser_open``, a headless Chromium confined to
    ``allowed_domains`` (every request, redirect and subresource)."""

    enabled: bool = False
    allowed_domains: list[str] = Field(default_factory=list)
    executable_path: Path = Path("/usr/bin/chromium")
    """The Chromium to drive (never downloaded)."""
    hosts: dict[str, str] = Field(default_factory=dict)
    """Names pinned to addresses, like ``/etc/hosts`` (the address rules still apply)."""
    allow_loopback: bool = False
    """Let pages on 127.0.0.1 / ::1 load (local services and tests only)."""
    timeout_secs: float = Field(default=30.0, gt=0)


class NotProvidedSection(BaseModel):
    """A section an agent runtime's config has for tools toolkeeper does not ship: accepted as written
    (any keys) and explained by ``toolkeeper tools explain``."""

    model_config = ConfigDict(extra="allow")


class AutonomySection(BaseModel):
    """An agent runtime's ``[autonomy]``: toolkeeper keeps these under ``[security]``. ``level``,
    ``allowed_commands`` and ``forbidden_paths`` are read into ``[security]``; other keys are
    accepted and shown by ``toolkeeper tools explain`` as not applied."""

    model_config = ConfigDict(extra="allow")

    level: Literal["read_only", "readonly", "supervised", "full"] | None = None
    allowed_commands: list[str] | None = None
    forbidden_paths: list[str] | None = None


class SkillsSection(_Section):
    dir: Path | None = None
    prompt_injection_mode: Literal["full", "compact"] = "full"


class MCPServerConfig(_Section):
    """One upstream MCP server whose tools are served as namespaced tools (``[[mcp.servers]]``).

    Exactly one of ``command`` (a program speaking MCP over stdio; its environment is the SDK's
    safe default plus ``env``) or ``url`` (Streamable HTTP, with ``headers``). Values of ``env``
    and ``headers`` may name environment variables as ``${NAME}`` (for secrets).
    """

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
    """The namespace of its tools: ``NAME-tool``."""
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    oauth: UpstreamOAuth | None = None
    """OAuth to an HTTP server (``toolkeeper upstream login NAME`` for a person's consent)."""
    risk: ToolRisk | None = None
    """The risk of every tool of this server; by default from its (untrusted) annotations, at
    least ``sensitive``, and ``high`` for a tool that says it may destroy."""
    tools: dict[str, ToolRisk] = Field(default_factory=dict)
    """Risk per tool (the upstream's tool name), over ``risk``."""
    hitl_mode: HitlMode | None = None
    trust: Literal["first-use", "explicit"] = "first-use"
    """``first-use`` pins a tool's fingerprint the first time it is seen; ``explicit`` serves
    nothing until ``toolkeeper tools trust NAME``. A changed tool is disabled either way."""
    connect_timeout_s: float = Field(default=10.0, gt=0)
    call_timeout_s: float = Field(default=60.0, gt=0)
    max_result_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    """The most bytes read of any one message from it (a tool's result, a resource, a page of
    a listing; over HTTP, of the answer to each request); a call answered with more gets an
    error naming this key."""
    list_timeout_s: float = Field(default=30.0, gt=0)
    """The longest one listing of it (all its pages) may take; what was listed by then is
    served, and the report says what was cut."""
    max_list_pages: int = Field(default=50, gt=0)
    """The most pages of one listing read from it (a page chain that never ends is cut)."""
    max_tools: int = Field(default=1000, gt=0)
    """The most tools taken from it (and the most resources, templates or prompts)."""
    resources: bool = True
    """Relay its resources and resource templates (``toolkeeper://mcp/NAME/URI``)."""
    prompts: bool = True
    """Relay its prompts (``NAME-prompt``)."""
    logs: bool = True
    """Relay its log messages (to the client whose call caused them, else to every client)."""
    sampling: bool = False
    """Relay its sampling requests to the client whose call caused them (audited)."""
    elicitation: bool = False
    """Relay its elicitation requests to the client whose call caused them (audited)."""
    discover: bool = False
    """Discover its revision first (2026-07-28 to a server that speaks both); by default the
    2025-11-25 handshake first, whose open connection relays subscriptions and list changes."""
    sandbox: bool = True
    """Confine a stdio server (its view: ``read_paths``, ``write_paths``, ``network``; relative
    paths from the config's folder); ``false``: toolkeeper's own rights (shown in tools pins)."""
    read_paths: list[Path] = Field(default_factory=list)
    write_paths: list[Path] = Field(default_factory=list)
    network: Network = False

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r} needs exactly one of 'command' (stdio) "
                             "or 'url' (Streamable HTTP)")
        if self.oauth is not None and self.url is None:
            raise ValueError(f"MCP server {self.name!r}: oauth is for a 'url' server only")
        confining = {"read_paths", "write_paths", "network"} & self.model_fields_set
        if confining and (self.url is not None or not self.sandbox):
            raise ValueError(f"MCP server {self.name!r}: {', '.join(sorted(confining))} confine "
                             "only a sandboxed stdio server ('command', without sandbox = false)")
        return self


class MCPSection(_Section):
    enabled: bool = False
    servers: list[MCPServerConfig] = Field(default_factory=list)
    refresh_s: float = Field(default=30.0, gt=0)
    """A client's tools/list lists an upstream again when its last listing is this old."""

    @model_validator(mode="after")
    def _unique(self) -> MCPSection:
        names = [s.name for s in self.servers]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"MCP server names must be unique: {', '.join(twice)} appear twice")
        return self


Channel = Literal["page", "client"]


class ApprovalSection(_Section):
    """``[approval]``: where a person decides. ``page`` (the approval page, the API and the
    CLI) always; ``client`` also asks the person at the MCP client (an input-required result
    with a form, on 2026-07-28 sessions) — off by default, since the person at the client may
    be the agent's user rather than the approver. The first decision from any channel wins.
    ``[approval.notify]`` tells a person that a request waits (``config/notify.py``)."""

    channels: list[Channel] = Field(default_factory=lambda: list[Channel](["page"]))
    notify: NotifySection = Field(default_factory=NotifySection)
    """``[approval.notify]``: notifications of each request (ntfy, email, Slack, …)."""
    ttl: dict[str, float | Literal["never"]] = Field(default_factory=dict)
    """Per tool name, how long its requests stay approvable: seconds, or ``"never"`` (it waits
    for a person however long it takes). Over the tool's own ``approval_ttl`` and over
    ``--approval-ttl``, which stays the default for every other tool."""

    @field_validator("ttl")
    @classmethod
    def _positive(cls, value: dict[str, float | str]) -> dict[str, float | str]:
        bad = [name for name, ttl in value.items() if ttl != "never" and float(ttl) <= 0]
        if bad:
            raise ValueError(f"ttl of {', '.join(bad)}: give seconds above 0, or \"never\"")
        return value

    @field_validator("channels")
    @classmethod
    def _page_always(cls, value: list[Channel]) -> list[Channel]:
        if "page" not in value:
            raise ValueError("must include 'page': the operator's page always decides")
        return value


ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
                         "ES512", "EdDSA")
"""The signature algorithms an access token may use: public-key ones only (never ``none``,
never an HMAC one, whose "key" would be the issuer's public key anyone can read)."""


class OAuthSection(_Section):
    """``[server.oauth]``: ``toolkeeper serve`` as an OAuth 2.1 protected resource. Access
    tokens are JWTs from ``issuer``, checked against its published keys; their scopes decide
    which tools a client sees and calls (``scopes``), and one scope (``operator_scope``) makes
    the holder the operator, who decides approvals and is refused on ``/mcp``. ``issuer`` and
    ``resource`` may come from ``serve``'s ``--oauth-issuer`` and ``--oauth-resource``
    instead."""

    issuer: str | None = None
    """The authorization server (its ``iss``); its keys are found through its metadata unless
    ``jwks_url`` names them."""
    resource: str | None = None
    """This server's MCP endpoint as clients reach it (``https://tools.example.com/mcp``): the
    audience every token must name."""
    jwks_url: str | None = None
    audience: list[str] = Field(default_factory=list)
    """Audiences accepted besides ``resource`` (an authorization server that names an API
    identifier instead)."""
    scopes: dict[str, list[str]] = Field(
        default_factory=lambda: {"toolkeeper:tools": ["*"]})
    """scope → the tools it lets a client see and call, as name patterns (``file_*``,
    ``github-*``); a token's tools are those of all its scopes."""
    operator_scope: str = "toolkeeper:operator"
    challenge_scopes: list[str] = Field(default_factory=list)
    """The scopes a 401 asks a client to request (``WWW-Authenticate``'s ``scope``): by
    default every tools scope; name fewer for least privilege. Never the operator scope."""
    algorithms: list[str] = Field(default_factory=lambda: list(ASYMMETRIC_ALGORITHMS))
    leeway_s: float = Field(default=30.0, ge=0, le=300)
    """Clock skew allowed on ``exp`` and ``nbf``."""
    jwks_max_age_s: float = Field(default=3600.0, gt=0)
    """The issuer's keys are fetched again when older than this."""
    jwks_min_refresh_s: float = Field(default=30.0, ge=0)
    """A token naming an unknown key fetches the keys again at most this often, and a fetch
    that failed is not tried again sooner."""
    jwks_timeout_s: float = Field(default=10.0, gt=0, le=120)
    """One deadline over a whole fetch of the keys (metadata and key set, every byte)."""

    @field_validator("issuer", "resource", "jwks_url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        if value is not None and not _https_or_loopback(value):
            raise ValueError(f"{value!r} must be an https:// URL (http:// only on 127.0.0.1, "
                             "localhost or [::1])")
        return value

    @field_validator("algorithms")
    @classmethod
    def _public_key_only(cls, value: list[str]) -> list[str]:
        refused = [a for a in value if a not in ASYMMETRIC_ALGORITHMS]
        if refused or not value:
            raise ValueError(f"{', '.join(refused) or 'an empty list'} refused: access tokens "
                             f"are checked with public keys only; use some of "
                             f"{', '.join(ASYMMETRIC_ALGORITHMS)}")
        return value

    @model_validator(mode="after")
    def _operator_apart(self) -> OAuthSection:
        if self.operator_scope in self.scopes:
            raise ValueError(f"operator_scope {self.operator_scope!r} is also a tools scope: "
                             "the scope that decides approvals must never call tools")
        unknown = [s for s in self.challenge_scopes if s not in self.scopes]
        if unknown:
            raise ValueError(f"challenge_scopes names {', '.join(unknown)}, which "
                             "[server.oauth.scopes] does not define")
        return self


def _https_or_loopback(url: str) -> bool:
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    host = host[1:host.find("]")] if host.startswith("[") else host.split(":", 1)[0]
    return bool(host) and (scheme == "https" or (
        scheme == "http" and host in ("127.0.0.1", "localhost", "::1")))


class ServerSection(_Section):
    """``[server]``: ``toolkeeper serve``'s HTTP face."""

    oauth: OAuthSection | None = None

    artifacts: bool = True
    """Offload results above ``max_inline_result_bytes`` to the artifact store (a preview and a
    ``resource_link`` reach the client); ``false`` sends them inline."""
    artifact_dir: Path | None = None
    """Where the store keeps its files (relative to this file's directory); by default
    ``artifacts/`` in the state dir. Never inside a directory a tool reaches."""
    artifact_store: str | None = Field(default=None, pattern=r"^(postgres(ql)?|s3)://")
    """A ``postgresql://`` database or an ``s3://bucket/prefix`` to offload to instead of a
    directory, so every replica reads what another stored. By default the ``store`` when it is
    PostgreSQL (unless ``artifact_dir`` is set)."""
    artifact_ttl_s: float = Field(default=86400.0, gt=0)
    """How long a client may read an artifact after its call stored it; then it is released
    and removed (at start and every ``min(ttl / 2, 10 min)``)."""
    tool_search: bool = False
    """``tools/list`` offers a search tool and the tools each client loaded with it, not every
    tool (as ``serve --tool-search``); over HTTP it needs ``--sessions``."""


class PolicySection(_Section):
    """``[policy]``: Cedar policies over the default set (``[security]`` as policies).
    Policies are read from ``dir`` (default: ``policies/`` beside this file) at start and
    whenever a file changes; rules made from decisions live in the store."""

    dir: Path | None = None
    """Where the ``*.cedar`` files are (relative to this file's directory)."""
    defaults: bool = True
    """Include the default set; ``false``: only the written policies decide, and a call no
    policy permits is denied."""


class ToolkeeperConfig(_Section):
    """Everything ``toolkeeper.toml`` can say; unknown keys are errors (a typo must not pass)."""

    locale: str | None = None
    store: str | None = Field(default=None, pattern=r"^postgres(ql)?://")
    """Where ``toolkeeper serve`` keeps its state when several replicas share it."""
    security: SecuritySection = Field(default_factory=SecuritySection)
    shell_tool: ShellSection = Field(default_factory=ShellSection)
    web_fetch: FetchSection = Field(default_factory=FetchSection)
    http_request: FetchSection = Field(default_factory=FetchSection)
    skills: SkillsSection = Field(default_factory=SkillsSection)
    web_search: WebSearchSection = Field(default_factory=WebSearchSection)
    text_browser: TextBrowserSection = Field(default_factory=TextBrowserSection)
    browser: BrowserSection = Field(default_factory=BrowserSection)
    autonomy: AutonomySection = Field(default_factory=AutonomySection)
    browser_delegate: NotProvidedSection = Field(default_factory=NotProvidedSection)
    notion: NotProvidedSection = Field(default_factory=NotProvidedSection)
    jira: NotProvidedSection = Field(default_factory=NotProvidedSection)
    linkedin: NotProvidedSection = Field(default_factory=NotProvidedSection)
    cloud_ops: NotProvidedSection = Field(default_factory=NotProvidedSection)
    sop: NotProvidedSection = Field(default_factory=NotProvidedSection)
    agents: dict[str, NotProvidedSection] = Field(default_factory=dict)
    """``[agents.<name>]``: sub-agents for a runtime's ``delegate`` tool, which toolkeeper does not
    ship (it is a tool layer, not an agent runtime)."""
    swarms: dict[str, NotProvidedSection] = Field(default_factory=dict)
    """``[swarms.<name>]``: for a runtime's ``swarm`` tool, likewise not shipped."""
    mcp: MCPSection = Field(default_factory=MCPSection)
    codemode: CodeModeSection = Field(default_factory=CodeModeSection)
    approval: ApprovalSection = Field(default_factory=ApprovalSection)
    server: ServerSection = Field(default_factory=ServerSection)
    policy: PolicySection = Field(default_factory=PolicySection)
    path: Path | None = Field(default=None, exclude=True)
    present: frozenset[str] = Field(default=frozenset(), exclude=True)
    """Top-level sections the file actually contains (for presence-based gates)."""

    def policy_dir(self) -> Path | None:
        """Where the Cedar policies are read from: ``[policy] dir``, else ``policies/`` beside
        this file (``None`` without a file)."""
        if self.policy.dir is not None:
            return self.policy.dir
        return self.path.parent / "policies" if self.path is not None else None

    def source(self, key: str) -> str:
        """Where a key was decided: ``file:line`` when the file sets it, else "default"."""
        if self.path is None:
            return "default"
        line = line_of(self.path.read_text(encoding="utf-8"), key)
        return f"{self.path}:{line}" if line else f"{self.path} (default)"

    def section_source(self, section: str) -> str | None:
        """Where a top-level section (``[agents.coder]`` counts for ``agents``) begins:
        ``file:line``, or ``None`` when the file does not have it."""
        if self.path is None or section not in self.present:
            return None
        line = section_line(self.path.read_text(encoding="utf-8"), section)
        return f"{self.path}:{line}" if line else str(self.path)


_AUTONOMY_KEYS = {"level": "autonomy", "allowed_commands": "allowed_commands",
                  "forbidden_paths": "forbidden_paths"}


def _autonomy_into_security(config: ToolkeeperConfig, data: dict[str, Any], file: Path,
                            text: str) -> None:
    """``[autonomy]`` keys into ``[security]``, where toolkeeper keeps them; the
    same setting given differently in both is an error naming both lines."""
    given = data.get("autonomy", {})
    security = data.get("security", {})
    for key, target in _AUTONOMY_KEYS.items():
        if key not in given:
            continue
        value = "read_only" if given[key] == "readonly" else given[key]
        if target in security and security[target] != value:
            raise ConfigError(
                f"{file}:{line_of(text, 'autonomy.' + key)}: autonomy.{key} = {given[key]!r} "
                f"contradicts security.{target} = {security[target]!r} "
                f"({file}:{line_of(text, 'security.' + target)}); keep one of them")
        setattr(config.security, target, value)


def _unknown_key(error: Any) -> str:
    """For an unknown key, the closest known one and the keys its table accepts."""
    loc = [str(part) for part in error["loc"]]
    model: type[BaseModel] = ToolkeeperConfig
    for part in loc[:-1]:
        field = model.model_fields.get(part)
        kind = field.annotation if field is not None else None
        if not (isinstance(kind, type) and issubclass(kind, BaseModel)):
            return "unknown key"
        model = kind
    names = list(model.model_fields)
    close = difflib.get_close_matches(loc[-1], names, n=1)
    table = f"[{'.'.join(loc[:-1])}]" if len(loc) > 1 else "the top level"
    shown = [f"[{name}]" if len(loc) == 1 else repr(name) for name in close]
    hint = f"; did you mean {shown[0]}?" if shown else ""
    return f"unknown key{hint} ({table} accepts: {', '.join(names)})"


def _problem(error: Any, file: Path, text: str) -> str:
    key = ".".join(str(p) for p in error["loc"])
    line = line_of(text, key)
    where = f"{file}:{line}" if line else str(file)
    extra = error["type"] == "extra_forbidden"
    return f"{where}: {key}: {_unknown_key(error) if extra else error['msg']}"


def load_config(path: str | Path | None = None) -> ToolkeeperConfig:
    """Read ``toolkeeper.toml`` (or ``path``); no file means the defaults.

    Raises:
        ConfigError: invalid TOML or an invalid value, naming the file, the key and the line.
    """
    file = Path(path) if path is not None else Path("toolkeeper.toml")
    if not file.is_file():
        if path is not None:
            raise ConfigError(f"{file}: no such configuration file")
        return ToolkeeperConfig()
    text = file.read_text(encoding="utf-8")
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: {exc}") from exc
    try:
        config = ToolkeeperConfig.model_validate(data)
    except ValidationError as exc:
        problems = [_problem(e, file, text) for e in exc.errors(include_url=False)]
        raise ConfigError("invalid configuration: " + "; ".join(problems)) from exc
    _autonomy_into_security(config, data, file, text)
    workspace = config.security.workspace
    if not workspace.is_absolute():
        config.security.workspace = (file.parent / workspace).resolve()
    skills = config.skills.dir
    if skills is not None and not skills.is_absolute():
        config.skills.dir = (file.parent / skills).resolve()  # like the workspace
    policies = config.policy.dir
    if policies is not None and not policies.is_absolute():
        config.policy.dir = (file.parent / policies).resolve()
    artifacts = config.server.artifact_dir
    if artifacts is not None and not artifacts.is_absolute():
        config.server.artifact_dir = (file.parent / artifacts).resolve()
    for server in config.mcp.servers:  # like the workspace
        server.read_paths = [file.parent / p for p in server.read_paths]
        server.write_paths = [file.parent / p for p in server.write_paths]
    return config.model_copy(update={"path": file.resolve(), "present": frozenset(data)})
