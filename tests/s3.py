"""An S3-compatible server for the tests: moto's server in this process on a free loopback port
(one per session), a fresh bucket per test, and the AWS_* variables that point the S3 client
(and every ``toolkeeper serve`` a test starts) at it."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import httpx
import pytest
from moto.server import ThreadedMotoServer


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3_url(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``s3://BUCKET/artifacts`` of a new, empty bucket."""
    for name, value in (("AWS_ENDPOINT_URL", s3_endpoint), ("AWS_ALLOW_HTTP", "true"),
                        ("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    bucket = "tk-" + uuid.uuid4().hex[:16]
    made = httpx.put(f"{s3_endpoint}/{bucket}", timeout=30)
    assert made.status_code == 200, made.text
    return f"s3://{bucket}/artifacts"
