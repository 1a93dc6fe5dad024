"""Processes that are stopped leave nothing and say so: ``monitor`` exits 130/143, killed launchers leave no
scratch in the temporary directory or /dev/shm (each test has a private TMPDIR, so other tests' files are not seen).
"""

from __future__ import annotations

import os
import shutil
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


# -- killed launchers: nothing in the temporary directory or /dev/shm ------------------------------------------------

def _private_shm_skip() -> str:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return "a private /dev/shm (unshare --mount, bind mount) needs root"
    return ""


needs_private_shm = pytest.mark.skipif(bool(_private_shm_skip()), reason=_private_shm_skip())

LAUNCHER = """
import sys
from _leak_workers import keeps_ucx_scratch
from tensorfabric.transfer.launch import spawn
spawn(keeps_ucx_scratch, 2, args=(sys.argv[1],), timeout_s=600)
"""

# What ``run`` does with its ranks: rank 0 posts each step's tokens to the launcher while it generates (they used
# to travel over a multiprocessing Queue, whose named semaphore a group kill left in /dev/shm); ``fleet`` the same
# launch with rank 0 as the authority.
STREAMING_LAUNCHER = """
import sys
from _leak_workers import keeps_ucx_scratch_posting
from tensorfabric.transfer.launch import launch, placement
launch(keeps_ucx_scratch_posting, placement({}, ranks=2), args=(sys.argv[1],), timeout_s=600,
       on_message=lambda rank, step: None, authority=0)
"""


def _launch(tmp: Path, ready: Path, launcher: str = LAUNCHER) -> subprocess.Popen[str]:
    """``spawn`` of two ranks in a mount namespace whose /dev/shm is ``tmp/shm``: every POSIX semaphore or shared
    memory segment the launcher, its ranks or multiprocessing's resource tracker create lands there, and only
    there, so what is left is this run's and no other test's."""
    for sub in ("shm", "tmp"):
        (tmp / sub).mkdir(exist_ok=True)
    ready.mkdir(exist_ok=True)
    env = {**_env(tmp / "tmp"), "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}"}
    script = f'mount --bind "{tmp / "shm"}" /dev/shm && exec "{sys.executable}" -c "$0" "$1"'
    with open(tmp / f"{ready.name}.err", "w") as err:  # a file, not a pipe: orphaned ranks would hold a pipe open
        return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, launcher,
                                 str(ready)], env=env, stdout=subprocess.DEVNULL, stderr=err, text=True,
                                start_new_session=True)


def _wait_ready(proc: subprocess.Popen[str], ready: Path, count: int) -> list[int]:
    deadline = time.monotonic() + 90
    while len(list(ready.iterdir())) < count:
        assert proc.poll() is None, (ready.parent / f"{ready.name}.err").read_text()[-2000:]
        assert time.monotonic() < deadline, "the ranks did not start"
        time.sleep(0.1)
    return [int(p.suffix[1:]) for p in ready.iterdir()]


def _gone(pids: list[int], within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in pids):
            return True
        time.sleep(0.1)
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


@needs_private_shm
@pytest.mark.timeout(60)
def test_group_sigkill_of_a_streaming_launch_as_run_and_fleet_do_leaves_no_semaphore(tmp_path: Path) -> None:
    proc = _launch(tmp_path, tmp_path / "ready", STREAMING_LAUNCHER)
    ranks = _wait_ready(proc, tmp_path / "ready", 2)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert _gone(ranks), "ranks outlived their launcher"
        assert sorted(os.listdir(tmp_path / "shm")) == []
    finally:
        for pid in ranks:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@needs_private_shm
@pytest.mark.timeout(240)
@pytest.mark.parametrize("group", [True, False], ids=["group-kill", "launcher-kill"])
def test_sigkill_of_a_launcher_leaves_nothing_after_the_next_start(tmp_path: Path, group: bool) -> None:
    proc = _launch(tmp_path, tmp_path / "ready")
    ranks = _wait_ready(proc, tmp_path / "ready", 2)
    try:
        if group:
            os.killpg(proc.pid, signal.SIGKILL)  # what a scheduler's hard stop or the OOM killer's cgroup kill does
        else:
            proc.kill()
        proc.wait(timeout=30)
        assert _gone(ranks), "ranks outlived their launcher"
        assert sorted(os.listdir(tmp_path / "shm")) == []  # no sem.mp-* (there is nothing left to unlink them)
        # The killed launcher's scratch (tf-spawn-<pid>, the ranks' tf-ucx-* inside) cannot be removed by anyone
        # still running; the next start of a launcher removes it, its owner being gone.
        second = _launch(tmp_path, tmp_path / "ready2")
        _wait_ready(second, tmp_path / "ready2", 2)
        left = [p.name for p in (tmp_path / "tmp").iterdir()]
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
        assert len(left) == 1 and left[0].startswith(f"tf-spawn-{second.pid}-"), left
        assert sorted(os.listdir(tmp_path / "tmp")) == [] and sorted(os.listdir(tmp_path / "shm")) == []
    finally:
        for pid in ranks:  # whatever the outcome, no orphan outlives the test
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _lab_skip() -> str:
    from tensorfabric.lab.netlink import privileges_missing

    return privileges_missing() or ""


@pytest.mark.skipif(bool(_lab_skip()), reason=f"a lab needs namespaces: {_lab_skip()}")
@pytest.mark.timeout(180)
def test_sigterm_to_a_lab_owner_leaves_no_rank_scratch(tmp_path: Path) -> None:
    name = f"lk{os.getpid() % 100000}"
    ready = tmp_path / "ready"
    ready.mkdir()
    (tmp_path / "tmp").mkdir()
    script = f"""
import sys, time
from tensorfabric.errors import Interrupted
from tensorfabric.lab import Lab
try:
    with Lab(hosts=2, rate="1gbit", name="{name}") as lab:
        lab.spawn([sys.executable, "{ROOT / 'tests' / '_leak_workers.py'}", "{ready}"])
        time.sleep(600)
except Interrupted as exc:
    sys.exit(exc.exit_code)
"""
    env = {**_env(tmp_path / "tmp"), "TENSORFABRIC_LAB_DIR": str(tmp_path / "state")}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while len(list(ready.iterdir())) < 2:  # both ranks hold their UCX-style scratch
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the lab's ranks did not start"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, err[-2000:]
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert f"tf-{name}-" not in ns


# -- native noise: one line per failure; the C++ frame dump only in --debug's detail ---------------------------------

NOISE = """
import sys
from _leak_workers import native_noise
from tensorfabric.transfer.launch import SpawnError, spawn
try:
    print(spawn(native_noise, 2, args=(sys.argv[1] == "fail",), timeout_s=60, grace_s=5))
except SpawnError as exc:
    print("LINE:", exc)
    print(exc.detail())
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fail", [True, False], ids=["peer-dies", "success"])
def test_native_stderr_of_ranks_is_kept_for_debug_when_a_peer_dies(tmp_path: Path, fail: bool) -> None:
    env = {**_env(tmp_path), "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}"}
    done = subprocess.run([sys.executable, "-c", NOISE, "fail" if fail else "ok"], env=env, capture_output=True,
                          text=True, timeout=100, check=False)
    err = done.stderr.splitlines()
    assert sum("python-level note from rank" in line for line in err) == 2  # Python's stderr is not captured
    frames = [line for line in err
              if line.startswith("frame #") or "Exception raised from" in line or "UCX  WARN" in line]
    if fail:
        assert frames == [], done.stderr[-2000:]
        [line] = [line for line in done.stdout.splitlines() if line.startswith("LINE:")]
        assert line.startswith("LINE: rank 0 process exited with code 17")
        assert "native library output is shown with --debug" in line
        # --debug shows the detail: every rank's dump is there, whole
        assert done.stdout.count("frame #16: c10::Error") == 2 and done.stdout.count("UCX  WARN") == 2
    else:
        assert done.stdout.strip() == "[0, 1]"
        assert len(frames) == 2 * 19  # a successful launch passes its ranks' native output on unchanged
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(bool(_lab_skip()), reason=f"a lab needs namespaces: {_lab_skip()}")
@pytest.mark.timeout(180)
def test_a_lab_rank_failure_is_one_line_and_its_native_noise_is_detail(tmp_path: Path) -> None:
    from _leak_workers import native_noise
    from tensorfabric.lab.launch import LabRankError, run_lab

    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}"}
    with pytest.raises(LabRankError) as info:
        run_lab("2x1gbit", native_noise, (True,), timeout_s=60, env=env, state_dir=tmp_path / "state")
    line = str(info.value)
    assert "\n" not in line and "frame #" not in line and "UCX" not in line
    assert line == "lab 2x1gbit: rank 1 failed: ConnectionError: peer rank 0 closed the connection during all_reduce"
    detail = info.value.detail()
    assert "--- rank 0 (exit status 17) ---" in detail and detail.count("UCX  WARN") == 2
