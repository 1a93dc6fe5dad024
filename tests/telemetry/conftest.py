"""Fixtures for the telemetry tests: a real redis-server loaded with a SONiC snapshot, promtool lookup."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .telemetry_support import FIXTURES


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A private redis-server on a free loopback port (no persistence), stopped after the test."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (Debian package redis-server); the SONiC source needs it")
    redis = pytest.importorskip("redis")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(host="127.0.0.1", port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail("redis-server did not answer within 5 s")
        yield "127.0.0.1", port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def load_snapshot(host: str, port: int, path: Path = FIXTURES / "sonic_redis_snapshot.json") -> None:
    """Load a {db name: {key: {field: value}}} snapshot into COUNTERS_DB (2) and CONFIG_DB (4)."""
    import redis

    data = json.loads(path.read_text())
    for name, db in (("COUNTERS_DB", 2), ("CONFIG_DB", 4)):
        client = redis.Redis(host=host, port=port, db=db)
        pipe = client.pipeline()
        for key, fields in data[name].items():
            pipe.hset(key, mapping=fields)
        pipe.execute()


@pytest.fixture
def promtool() -> str:
    found = shutil.which("promtool")
    local = Path(__file__).resolve().parents[2] / ".cache" / "tools" / "bin" / "promtool"
    if found is None and local.is_file():
        found = str(local)
    if found is None:
        pytest.skip("promtool not found on PATH or in .cache/tools/bin (make tools extracts it from Debian's "
                    "prometheus package)")
    return found


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    """The real Prometheus server (Debian's package, unpacked by scripts/install-tools.sh)."""
    found = shutil.which("prometheus")
    local = Path(__file__).resolve().parents[2] / ".cache" / "tools" / "bin" / "prometheus"
    if found is None and local.is_file():
        found = str(local)
    if found is None:
        pytest.skip("prometheus not found on PATH or in .cache/tools/bin (scripts/install-tools.sh unpacks it from "
                    "Debian's prometheus package)")
    return found
