"""Shared test configuration: async tests run on anyio's asyncio backend; in CI a skipped test
fails the run, so a missing package or backend cannot hide a bug."""

from __future__ import annotations

import inspect
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator

import pytest

# The semantic search keeps tool vectors on disk: in a folder of this run's own (its
# subprocesses included), never the user's cache.
# Made once, by the process that then removes it at its end (pytest, or pytest-xdist's
# controller); its workers and subprocesses inherit it.
OWN_CACHE = "TOOLKEEPER_CACHE_DIR" not in os.environ
if OWN_CACHE:
    os.environ["TOOLKEEPER_CACHE_DIR"] = tempfile.mkdtemp(prefix="toolkeeper-cache-")
CACHE = os.environ["TOOLKEEPER_CACHE_DIR"]

# A CLI test lays rich's tables out to the COLUMNS it hands its CliRunner; a rich Console made
# at import takes its width from COLUMNS then and keeps it, so one the suite inherited (pytest-xdist
# workers get COLUMNS=80) would wrap those tables whatever a test asks for.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

# A suite a shell started in the background without job control inherits SIGINT ignored, and
# so would every server it starts (an ignored signal stays ignored across exec, so a Ctrl-C
# before serve takes the signal would be lost): the suite's processes get SIGINT as a
# terminal gives it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fresh_spares() -> Iterator[None]:
    """The process's spare launch gates closed before and after a test that counts them."""
    from toolkeeper.sandbox.spare import spares

    spares.close()
    spares.reopen()
    yield
    spares.close()
    spares.reopen()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        function = getattr(item, "function", None)
        if function is not None and inspect.iscoroutinefunction(function):
            item.add_marker(pytest.mark.anyio)


def _skips_fail() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("TOOLKEEPER_NO_SKIPS") == "1"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if OWN_CACHE:  # workers given the controller's folder leave it to the controller
        shutil.rmtree(CACHE, ignore_errors=True)
    if not _skips_fail():
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped:
        print(f"\n{len(skipped)} skipped test(s) fail the run here (CI or TOOLKEEPER_NO_SKIPS=1): "
              "install what they need (make test does) — "
              + "; ".join(str(getattr(r, "longrepr", r))[:200] for r in skipped[:5]))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


pytest_plugins = ["tests.postgres", "tests.s3"]
