"""Where ``toolkeeper serve`` keeps artifacts, as the operator chooses it: ``--artifacts`` over
``[server] artifact_store``/``artifact_dir`` over PostgreSQL when the store is PostgreSQL over
``artifacts/`` in the state dir; a bucket that cannot be used stops serve in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolkeeper.cli.serve_settings import serve_settings
from toolkeeper.errors import ConfigError

PG = "postgresql://toolkeeper@db.internal/toolkeeper"


def _where(tmp_path: Path, server: str | None = None, **flags: object) -> tuple[object, object]:
    if server is not None:
        (tmp_path / "toolkeeper.toml").write_text(f"[server]\n{server}\n")
        flags["config"] = tmp_path / "toolkeeper.toml"
    settings = serve_settings({"state_dir": tmp_path / "state", "workspace": tmp_path, **flags})
    return settings.artifact_url, settings.artifact_dir


def test_artifacts_follow_a_postgresql_store_unless_told_otherwise(tmp_path: Path) -> None:
    state = (tmp_path / "state" / "artifacts").resolve()
    assert _where(tmp_path) == (None, state)
    assert _where(tmp_path, store=PG) == (PG, None)  # every replica reads them
    assert _where(tmp_path, store=PG, artifacts="off") == (None, None)
    assert _where(tmp_path, store=PG, artifacts=str(tmp_path / "here")) == (
        None, (tmp_path / "here").resolve())
    assert _where(tmp_path, 'artifact_dir = "/srv/artifacts"', store=PG) == (
        None, Path("/srv/artifacts"))
    assert _where(tmp_path, "artifacts = false", store=PG) == (None, None)


def test_a_bucket_or_a_database_is_named_by_flag_or_config(tmp_path: Path) -> None:
    assert _where(tmp_path, artifacts="s3://results/tk") == ("s3://results/tk", None)
    assert _where(tmp_path, 'artifact_store = "s3://results/tk"', store=PG) == (
        "s3://results/tk", None)
    assert _where(tmp_path, 'artifact_store = "s3://results/tk"', artifacts=PG) == (PG, None)
    with pytest.raises(ConfigError, match="artifact_store"):
        _where(tmp_path, 'artifact_store = "ftp://results"')


def test_a_bucket_serve_cannot_use_stops_it_in_one_line(tmp_path: Path, s3_url: str) -> None:
    missing = s3_url.replace("s3://", "s3://gone-")
    refused = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "serve", "--port", "0", "--no-builtins",
         "--state-dir", str(tmp_path / "state"), "--artifacts", missing],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
        env={**os.environ, "TOOLKEEPER_TOKEN": "test-operator-token-0123456789"})
    assert refused.returncode == 2, refused.stdout
    (line,) = refused.stderr.strip().splitlines()
    assert f"the artifact bucket {missing}: no such bucket" in line, line
    assert "AWS_* environment variables" in line


def test_an_artifact_url_of_another_scheme_is_refused_naming_the_forms_there_are(
        tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--artifacts ftp://x: .* a directory \(--artifacts "
                                          r"DIR\), a postgresql:// database or an s3://"):
        _where(tmp_path, artifacts="ftp://x")
    serve = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", "--port", "0", "--no-builtins",
         "--state-dir", str(tmp_path / "state"), "--artifacts", "ftp://x"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "TOOLKEEPER_TOKEN": "test-operator-token-0123456789"})
    try:
        _, stderr = serve.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        serve.kill()
        serve.communicate(timeout=60)
        pytest.fail("serve started with --artifacts ftp://x instead of refusing it")
    assert serve.returncode == 2
    (line,) = stderr.strip().splitlines()
    assert "s3://bucket/prefix, or sends them inline (--artifacts off)" in line, line
    assert not (tmp_path / "ftp:").exists()
