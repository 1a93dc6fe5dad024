"""SIGTERM (and SIGHUP) mid-run, per launcher: local spawn, lab ranks, the Lab context manager.

Each test starts a real run in its own session, waits until the ranks (or lab processes) are up, signals only the
launching process -- as systemd, Kubernetes or a batch scheduler would -- and then finds no process, network
namespace or temporary directory left behind, and the shell's exit status for the signal (143, 129).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _descendants(pid: int) -> set[int]:
    tree, found, todo = _children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(what: str, check: Callable[[], bool], proc: subprocess.Popen[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"run ended (exit {proc.returncode}) before {what}: {err[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def _start(argv: list[str], tmp: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TMPDIR": str(tmp),
           "TENSORFABRIC_LAB_DIR": str(tmp / "state")}
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(name, None)
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=tmp, preexec_fn=_default_dispositions)


def _default_dispositions() -> None:
    # The launcher leaves an *ignored* SIGHUP alone (nohup's promise), and an ignored disposition is inherited:
    # a suite started under nohup would hand every launcher here a SIGHUP it must not act on.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _stop(proc: subprocess.Popen[str], signum: int) -> tuple[int, str, set[int]]:
    before = _descendants(proc.pid)
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the launcher did not exit within 90 s of the signal")
    deadline = time.monotonic() + 15  # a killed rank's last moments; the launcher reaped them already
    while any(_alive(p) for p in before) and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc.returncode, err, {p for p in before if _alive(p)}


def _temp_dirs(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("tf-"))


BENCH = [sys.executable, "-m", "tensorfabric", "bench", "--max", "1M", "--iters", "1000000", "--warmup", "0",
         "--timeout", "120s", "--json"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_local_spawn_stops_and_reaps_ranks(tmp_path: Path, signum: int, code: int) -> None:
    proc = _start([*BENCH, "--nproc", "2"], tmp_path)

    def ranks_running() -> bool:
        return bool(_temp_dirs(tmp_path)) and sum(
            "tensorfabric-rank" in _cmdline(p) or "spawn_main" in _cmdline(p) for p in _descendants(proc.pid)) >= 2

    _wait_for("two ranks", ranks_running, proc)
    time.sleep(2.0)  # well inside the sweep
    status, err, left = _stop(proc, signum)
    assert status == code, err[-3000:]
    assert "Traceback" not in err
    assert left == set(), f"processes left: {[_cmdline(p) for p in left]}"
    assert _temp_dirs(tmp_path) == []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix)]


def _lab_skip() -> str:
    from tensorfabric.lab.netlink import privileges_missing

    return privileges_missing() or ""


needs_lab = pytest.mark.skipif(bool(_lab_skip()), reason=f"lab launchers need namespaces: {_lab_skip()}")


@needs_lab
@pytest.mark.timeout(300)
def test_lab_ranks_are_killed_and_the_lab_torn_down(tmp_path: Path) -> None:
    name = f"sig{os.getpid() % 100000}"
    proc = _start([*BENCH, "--lab", "2x1gbit", "--lab-name", name], tmp_path)

    def ranks_running() -> bool:
        return len(_namespaces(f"tf-{name}-")) >= 3 and sum(
            "tensorfabric.lab.rank" in _cmdline(p) for p in _descendants(proc.pid)) >= 2

    _wait_for("two lab ranks", ranks_running, proc)
    ranks = [p for p in _descendants(proc.pid) if "tensorfabric.lab.rank" in _cmdline(p)]
    time.sleep(2.0)
    status, err, left = _stop(proc, signal.SIGTERM)
    assert status == 143, err[-3000:]
    assert "Traceback" not in err
    assert left == set() and not any(_alive(p) for p in ranks)
    assert _namespaces(f"tf-{name}-") == []
    assert _temp_dirs(tmp_path) == []
    assert list((tmp_path / "state").glob("*.json")) == []


@needs_lab
@pytest.mark.timeout(300)
def test_lab_context_manager_tears_down_on_sigterm(tmp_path: Path) -> None:
    name = f"cm{os.getpid() % 100000}"
    script = textwrap.dedent(f"""
        import sys, time
        from tensorfabric.errors import Interrupted
        from tensorfabric.lab import Lab
        try:
            with Lab(hosts=2, rate="1gbit", name="{name}") as lab:
                lab.spawn(["sleep", "600"])
                print("ready", flush=True)
                time.sleep(600)
        except Interrupted as exc:
            sys.exit(exc.exit_code)
    """)
    proc = _start([sys.executable, "-c", script], tmp_path)
    assert proc.stdout is not None
    _wait_for("the lab", lambda: len(_namespaces(f"tf-{name}-")) >= 3 and any(
        "sleep 600" in _cmdline(p) for p in _descendants(proc.pid)), proc)
    sleepers = [p for p in _descendants(proc.pid) if "sleep 600" in _cmdline(p)]
    status, err, left = _stop(proc, signal.SIGTERM)
    assert status == 143, err[-3000:]
    assert left == set() and not any(_alive(p) for p in sleepers)
    assert _namespaces(f"tf-{name}-") == []
    assert list((tmp_path / "state").glob("*.json")) == []


def test_signals_outside_the_block_keep_their_handlers() -> None:
    from tensorfabric.errors import Interrupted
    from tensorfabric.signals import terminate_as_interrupt

    before = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup's setting must survive
    try:
        with pytest.raises(Interrupted) as caught, terminate_as_interrupt():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        assert caught.value.exit_code == 143
        assert signal.getsignal(signal.SIGTERM) == before
    finally:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_deferred_signals_wait_for_a_checkpoint_and_raise_on_the_way_out() -> None:
    from tensorfabric.errors import Interrupted
    from tensorfabric.signals import deferred_signals

    before = signal.getsignal(signal.SIGINT)
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt) as caught, deferred_signals() as pending:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        steps.append("went on")  # the signal did not cut the step short
        assert pending
        pending.check()
        steps.append("never")
    assert steps == ["went on"] and not isinstance(caught.value, Interrupted)
    assert signal.getsignal(signal.SIGINT) == before
    with pytest.raises(Interrupted) as term, deferred_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        steps.append("finished")  # nobody polled: the block raises on the way out
    assert term.value.exit_code == 143 and steps[-1] == "finished"
