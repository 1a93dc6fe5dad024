"""Processes that are stopped leave nothing and say so: ``monitor`` exits 130/143, killed launchers leave no
scratch in the temporary directory or /dev/shm (each test has a private TMPDIR, so other tests' files are not seen).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "telemetry"


def _env(tmp: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TMPDIR": str(tmp)}
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(name, None)
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _metrics_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


@pytest.mark.timeout(120)
@pytest.mark.parametrize("serve", [False, True], ids=["live-view", "serve"])
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_monitor_exits_with_the_signal_status(tmp_path: Path, serve: bool, signum: int, code: int) -> None:
    port = _free_port()
    argv = [sys.executable, "-m", "tensorfabric", "monitor", "--interval", "0.2s",
            "--source", f"rdma-json:{FIXTURES / 'rdma_statistic.json'}"]
    if serve:
        argv += ["--serve", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(argv, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        # Polling for a while: the exporter answers, or the live view has run three seconds (a few polls).
        deadline, settled = time.monotonic() + 60, time.monotonic() + 3
        while not (_metrics_up(port) if serve else time.monotonic() > settled):
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the monitor did not start polling"
            time.sleep(0.2)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err[-2000:]
    assert "Traceback" not in err
    if serve:
        assert not _metrics_up(port)
