"""``toolkeeper serve``: the governed MCP server, over Streamable HTTP or stdio."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, cast

import typer

from ..errors import ToolkeeperError
from .lifecycle import Lifecycle, Stopped
from .report import fail
from .serve_extras import ServeAsks, missing_extras
from .serve_settings import ServeSettings, serve_settings
from .serve_workers import supervise

__all__ = ["guarded", "serve", "serve_settings_of"]


def serve(
    targets: Annotated[list[str] | None, typer.Argument(
        help="Modules or files of tools to serve ('pkg.mod', 'file.py', 'file.py:obj').")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="toolkeeper.toml: which built-ins exist, autonomy, skills.")] = None,
    stdio: Annotated[bool, typer.Option("--stdio", help="Serve over stdin/stdout.")] = False,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 takes a free one).")] = 8765,
    state_dir: Annotated[Path | None, typer.Option(
        help="Tokens, approvals and audit (owner-only; never inside a workspace). Default: "
             "$XDG_STATE_HOME/toolkeeper, else ~/.local/state/toolkeeper.")] = None,
    # help is rich markup: a config table is written \\[name] to be shown as [name]
    workspace: Annotated[Path | None, typer.Option(
        help="The built-in tools' workspace; wins over the config's \\[security] workspace. "
             "Default: the config's, else the current directory.")] = None,
    no_builtins: Annotated[bool, typer.Option("--no-builtins",
                                              help="Serve only the TARGET tools.")] = False,
    auth: Annotated[str, typer.Option(
        help="How clients authenticate on /mcp: 'token' (a client token) or 'none' (no "
             "credential, loopback only). Deciding always needs the operator.")] = "token",
    rate_limit: Annotated[float, typer.Option(
        help="Requests per second per client (bursts of twice that); 0 turns the limit "
             "off (a benchmark, or a proxy in front that limits).")] = 50.0,
    public_host: Annotated[list[str] | None, typer.Option(
        help="A host name clients use to reach this server (behind a load balancer); "
             "requests naming another Host are refused. Repeatable.")] = None,
    store: Annotated[str | None, typer.Option(
        help="Where approvals, audit, tokens, page sessions and pins live: a postgresql:// URL "
             "shared by replicas (default: SQLite in --state-dir, or the config's 'store').")
                     ] = None,
    approval_wait: Annotated[float, typer.Option(
        help="Seconds a call that needs approval waits for a decision (toolkeeper approvals "
             "decide) before it answers 'pending'.")] = 30.0,
    approval_ttl: Annotated[float, typer.Option(
        help="Seconds a request stays approvable once asked; then it expires (a "
             "CONTINUE_ON_TIMEOUT one is approved at its hitl_timeout_seconds instead).")
                            ] = 3600.0,
    keep_sessions: Annotated[bool, typer.Option(
        "--sessions", help="Keep an MCP session per client, so a tool can ask its client "
                           "(sampling, elicitation) on the 2025-11-25 wire and a broken stream "
                           "resumes; a session is every worker's and every replica's on the "
                           "store (any of them carries it on).")] = False,
    tool_search: Annotated[bool, typer.Option(
        "--tool-search", help="tools/list offers a search tool and the tools each client "
                              "loaded with it, instead of every tool (a large gateway in "
                              "few tokens); over HTTP needs --sessions; one process only "
                              "(--workers 1: the loaded tools are kept in its memory).")
                     ] = False,
    oauth_issuer: Annotated[str | None, typer.Option(
        help="Accept OAuth access tokens (JWTs) from this authorization server too (its "
             "'iss'); needs --oauth-resource. Wins over \\[server.oauth] issuer.")] = None,
    oauth_resource: Annotated[str | None, typer.Option(
        help="This server's MCP endpoint as clients reach it (https://tools.example.com/mcp): "
             "the audience every access token must name.")] = None,
    oauth_audience: Annotated[list[str] | None, typer.Option(
        help="Another audience to accept besides --oauth-resource (an API identifier). "
             "Repeatable.")] = None,
    oauth_jwks_url: Annotated[str | None, typer.Option(
        help="The issuer's key set (default: found through the issuer's metadata).")] = None,
    metrics_port: Annotated[int | None, typer.Option(
        help="Also serve /metrics without a credential on 127.0.0.1 at this port (0 takes a "
             "free one), for a Prometheus on this machine; on the main port /metrics needs "
             "the operator token. Not with --workers N (it would count one worker).")] = None,
    artifacts: Annotated[str | None, typer.Option(
        help="Where results above max_inline_result_bytes are offloaded: a directory, a "
             "postgresql:// database or an s3://bucket/prefix (every replica reads them; "
             "AWS_* variables give the bucket's credentials), or 'off' to send them "
             "inline. Default: the config's \\[server] artifact_store or artifact_dir, else "
             "the --store when it is PostgreSQL, else artifacts/ in --state-dir (with "
             "--workers N, none: results sent whole).")] = None,
    workers: Annotated[str, typer.Option(
        help="Processes that serve on the one port (SO_REUSEPORT), sharing the store: a "
             "number, or 'auto' for one per core (one with --stdio, --tool-search, "
             "--metrics-port or --artifacts DIR, which need one process). A worker that ends "
             "stops them all.")] = "1",
) -> None:
    """Serve tools to MCP clients, every call through the invoker (budget, validation,
    approval, timeouts, audit). Calls that need approval are stored and answered 'pending'."""
    options = dict(locals())  # the command's options, as given
    life = Lifecycle()
    life.install()  # SIGTERM and SIGINT are serve's from here on, whatever it is doing
    guarded(life, lambda: _serve(life, serve_settings_of(options)))


def guarded(life: Lifecycle, body: Callable[[], None]) -> None:
    """Run ``body`` (serve's start and serving) as serve ends: quietly on a stop signal while
    starting, in one line on an unexpected error, as the signal asks once stopped."""
    try:
        try:
            body()
        except* Stopped:  # a signal while starting: nothing serves yet, nothing to answer
            pass
    except (typer.Exit, typer.Abort):
        raise
    except Exception as exc:  # a fault of ours or of a library: one line, not 100
        unexpected = RuntimeError("toolkeeper serve stopped on an unexpected error: "
                                  + _one_line(exc))
        unexpected.__cause__ = exc  # --debug shows its traceback
        raise fail(unexpected) from exc
    if life.stopping():
        life.end()  # the process ends here, as the signal asks


def serve_settings_of(options: dict[str, object]) -> ServeSettings:
    """The settings of the command's ``options``: the flags checked, the config loaded and
    merged under them (one line naming what is wrong), the extras they need installed."""
    flags = dict(options)
    for repeated in ("targets", "public_host", "oauth_audience"):  # not given: none
        flags[repeated] = tuple(cast("list[str] | None", flags[repeated]) or ())
    absent = missing_extras(ServeAsks(
        config=cast("Path | None", flags["config"]), builtins=not flags["no_builtins"],
        store=cast("str | None", flags["store"]),
        oauth=bool(flags["oauth_issuer"] or flags["oauth_resource"])))
    if absent is not None:  # every extra missing, in one install line, before anything starts
        raise fail(absent)
    try:
        return serve_settings(flags)
    except ToolkeeperError as exc:
        raise fail(exc) from exc


def _serve(life: Lifecycle, settings: ServeSettings) -> None:
    life.check()
    if settings.flags.workers > 1:  # the supervisor: its workers load the server
        supervise(settings, life)
        return
    # The server, and the MCP SDK under it (most of a second to import), are loaded here, when
    # serve runs: every other command, and serve's --help, load neither.
    from .serve_run import run

    run(settings, life)


def _one_line(exc: BaseException) -> str:
    """An exception as one line: its type and message (the first of a group's)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:600]
