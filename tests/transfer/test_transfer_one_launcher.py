"""One launcher: where ranks run is decided by ``transfer.launch.placement`` and they run through ``launch``; no
other module starts rank processes itself."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest

from tensorfabric.errors import InputError, LabError, TransferError
from tensorfabric.transfer.launch import (
    Placement,
    SpawnError,
    SpawnInputError,
    _target_error,
    launch,
    placement,
)

from . import _launcher_workers as workers

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "tensorfabric"
LAUNCHERS = {SRC / "transfer" / "launch.py", SRC / "transfer" / "spawn.py", SRC / "lab" / "launch.py"}
NOT_RANKS = {
    # A pool of simulation workers (sweep points), not ranks of a job: no rendezvous, no torchrun environment.
    SRC / "sim" / "executors.py",
}
TORCHRUN = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.1.0.7",
            "MASTER_PORT": "29500"}


RUNNERS = {"spawn", "run_lab", "run_ranks", "run_distributed"}
"""The targets' own entry points: called only by the launcher (``launch``), re-exported only by package
``__init__`` modules."""
RUNNER_HOMES = {"tensorfabric.transfer", "tensorfabric.transfer.launch", "tensorfabric.transfer.spawn",
                "tensorfabric.lab", "tensorfabric.lab.launch"}


def _starts_ranks(tree: ast.AST, *, reexports: bool = False) -> list[str]:
    """What in ``tree`` starts processes the way a launcher does: multiprocessing contexts and processes (and
    their Queue, whose named semaphore a killed job leaves behind), a command line running a lab rank, a lab's
    ``spawn``, or a target's runner imported past :func:`launch` (``reexports``: a package's public names)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("multiprocessing"):
            names = {a.name for a in node.names} & {"Process", "Queue", "get_context", "Pool", "SimpleQueue"}
            found += [f"line {node.lineno}: from {node.module} import {n}" for n in sorted(names)]
        if isinstance(node, ast.ImportFrom) and node.module in RUNNER_HOMES and not reexports:
            names = {a.name for a in node.names} & RUNNERS
            found += [f"line {node.lineno}: from {node.module} import {n}" for n in sorted(names)]
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name == "get_context" or (name in ("Process", "spawn") and isinstance(func, ast.Attribute)):
            found.append(f"line {node.lineno}: {ast.unparse(func)}(")
        for arg in ast.walk(node):
            if isinstance(arg, ast.Constant) and arg.value == "tensorfabric.lab.rank" and name not in ("print",):
                found.append(f"line {node.lineno}: {ast.unparse(func)}([... 'tensorfabric.lab.rank' ...])")
                break
    return found


def _sources() -> list[Path]:
    return sorted([*SRC.rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")])


def test_no_module_outside_the_launcher_starts_rank_processes() -> None:
    offenders = {str(path.relative_to(ROOT)): hits for path in _sources()
                 if path not in LAUNCHERS | NOT_RANKS
                 and (hits := _starts_ranks(ast.parse(path.read_text(), str(path)),
                                            reexports=path.name == "__init__.py"))}
    assert offenders == {}, "start ranks through tensorfabric.transfer.launch.launch, not by hand"


def test_the_scan_finds_what_it_forbids() -> None:
    code = ("import multiprocessing as mp\nq = mp.get_context('spawn').Queue()\n"
            "from multiprocessing import Process\nctx.Process(target=f)\n"
            "lab.popen(h, [sys.executable, '-m', 'tensorfabric.lab.rank', job])\n"
            "from tensorfabric.transfer import init, spawn\nfrom tensorfabric.lab.launch import run_ranks\n"
            "lab.spawn([sys.executable, __file__, '--rank'])\n")
    assert len(_starts_ranks(ast.parse(code))) == 7
    assert len(_starts_ranks(ast.parse(code), reexports=True)) == 5
    assert _starts_ranks(ast.parse((SRC / "transfer" / "spawn.py").read_text()))  # the launcher itself does


# --- placement ---------------------------------------------------------------------------------------------------

def test_inside_a_torchrun_job_this_process_is_its_rank_whatever_was_asked() -> None:
    where = placement(TORCHRUN, ranks=8, lab="2x1gbit")
    assert (where.kind, where.ranks, where.rank, where.local_ranks, where.launcher) == ("job", 4, 3, 2, "torchrun")
    assert where.launched and dict(where.env) == {}


@pytest.mark.parametrize(("environ", "launcher", "rank", "world"), [
    ({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "4"}, "Slurm", 5, 8),
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, "Open MPI", 2, 3),
    ({"PMI_RANK": "1", "PMI_SIZE": "2"}, "MPI (PMI)", 1, 2),
])
def test_slurm_and_mpi_jobs_get_torchrun_names(environ: dict[str, str], launcher: str, rank: int,
                                                world: int) -> None:
    env = {**environ, "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    where = placement(env, ranks=1)
    assert (where.kind, where.launcher, where.rank, where.ranks) == ("job", launcher, rank, world)
    assert where.env == {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": environ.get(
        "SLURM_LOCALID", environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))}


def test_a_slurm_job_without_a_master_address_is_input_error() -> None:
    with pytest.raises(InputError, match="started by Slurm but MASTER_ADDR and MASTER_PORT not set"):
        placement({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, ranks=2)


def test_a_one_task_slurm_step_is_no_job_the_ranks_asked_for_run_locally() -> None:
    single = {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0"}  # srun -n 1 tensorfabric run --tp 4
    assert placement(single, ranks=4) == Placement("local", 4, 4)  # no rendezvous address asked for either


def test_no_job_one_rank_runs_in_process_more_run_locally() -> None:
    assert placement({}, ranks=1) == Placement("inprocess", 1, 1)
    assert placement({"RANK": "0"}, ranks=3) == Placement("local", 3, 3)  # half a torchrun environment is none
    with pytest.raises(TransferError, match="must be a positive integer"):
        placement({}, ranks=0)


def test_a_lab_spec_places_one_rank_per_host_at_its_link_rate() -> None:
    where = placement({}, ranks=1, lab="3x100mbit", lab_name="t1")
    assert (where.kind, where.ranks, where.local_ranks, where.spec, where.name, where.rate_bps) == \
        ("lab", 3, 3, "3x100mbit", "t1", 100e6)
    assert where.hosts == ("h0", "h1", "h2")
    with pytest.raises(InputError):
        placement({}, ranks=1, lab="three-hosts")


def test_a_running_lab_that_does_not_exist_is_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENSORFABRIC_LAB_DIR", str(tmp_path))
    with pytest.raises(InputError, match="lab 'nolab' does not exist"):
        placement({}, ranks=1, running_lab="nolab")


def test_variables_for_one_host_need_named_hosts() -> None:
    with pytest.raises(InputError, match="use a lab"):
        launch(workers.chatty, placement({}, ranks=1), args=(0,), host_env={"h1": {"X": "1"}})


def test_an_authority_ends_the_wait_for_ranks_a_grace_after_it_exits() -> None:
    from tensorfabric.lab.launch import wait_ranks

    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    codes = wait_ranks([lambda: 0 if now[0] > 1 else None, lambda: 1, lambda: None], timeout_s=100, grace_s=2,
                       authority=0, clock=lambda: now[0], sleep=sleep)
    assert codes == [0, 1, None] and 3.0 <= now[0] < 3.2  # rank 1's failure alone started no grace


# --- launch ------------------------------------------------------------------------------------------------------

def test_in_process_messages_reach_the_callback() -> None:
    got: list[tuple[int, object]] = []
    results = launch(workers.chatty, placement({}, ranks=1), args=(3,), on_message=lambda r, m: got.append((r, m)))
    assert results == {0: 0} and got == [(0, [0, 0]), (0, [1, 2]), (0, [2, 4])]


def test_inside_a_job_only_this_ranks_result_comes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "29500"}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    where = placement(env, ranks=2)
    monkeypatch.setattr("os.environ", {**env})
    assert launch(workers.chatty, where, args=(2,)) == {1: 1}
    import os

    assert os.environ["RANK"] == "1" and os.environ["WORLD_SIZE"] == "2"  # env:// reads torchrun's names


@pytest.mark.timeout(60)
def test_spawned_ranks_post_over_their_pipe_in_order() -> None:
    got: list[tuple[int, object]] = []
    results = launch(workers.chatty, placement({}, ranks=2), args=(50,), timeout_s=40,
                     on_message=lambda r, m: got.append((r, m)))
    assert results == {0: 0, 1: 1}
    assert got == [(0, [s, 2 * s]) for s in range(50)]


@pytest.mark.timeout(60)
def test_an_authority_rank_ends_the_launch_and_the_others_do_not_fail_it() -> None:
    started = time.monotonic()
    results = launch(workers.authority_then_stragglers, placement({}, ranks=3), timeout_s=40, grace_s=1,
                     authority=0)
    assert results == {0: "report from 0", 1: None, 2: None}
    assert time.monotonic() - started < 30  # the hung rank 2 was stopped a grace after rank 0 answered


def _lab_failure(input_error: bool = False) -> LabError:
    from tensorfabric.lab.launch import LabRankError, LabRankInputError

    cls = LabRankInputError if input_error else LabRankError
    return cls("lab 2x1gbit: rank 1 failed: ValueError: no such layer (1 other rank also raised)",
               "--- rank 0 (exit status 1) ---\nTraceback ...",
               {0: ("TransferError", "peer 1 gone", "Traceback 0", False),
                1: ("ValueError", "no such layer", "Traceback 1", input_error)}, first=1)


def test_a_lab_failure_is_the_launchers_one_failure_type_with_its_own_line() -> None:
    error = _target_error(_lab_failure())
    assert type(error) is SpawnError
    assert str(error) == "lab 2x1gbit: rank 1 failed: ValueError: no such layer (1 other rank also raised)"
    assert error.detail().startswith("--- rank 0 (exit status 1) ---")
    assert error.root_cause() == "TransferError: peer 1 gone" and error.peer == 1
    assert {r: (c.error, c.message) for r, c in error.causes.items()} == {
        0: ("TransferError", "peer 1 gone"), 1: ("ValueError", "no such layer")}
    assert isinstance(_target_error(_lab_failure(input_error=True)), SpawnInputError)
    plain = LabError("lab 2x1gbit: could not build")
    assert _target_error(plain) is plain  # not a rank failure: unchanged


# --- the lab target (root) ---------------------------------------------------------------------------------------

IN_A_RUNNING_LAB = """
import os, sys, time
from tensorfabric.lab import Lab
from tensorfabric.transfer.launch import launch, placement

def where_am_i(rank, delay):
    if rank == 2:
        time.sleep(delay)  # a straggler: stopped a grace after rank 0 answered
    return os.environ["TENSORFABRIC_LAB_HOST"], os.environ.get("TF_TEST_MARK")

if __name__ == "__main__":
    with Lab(hosts=3, rate="1gbit", name=sys.argv[1]) as lab:
        where = placement(os.environ, ranks=1, running_lab=lab.name)
        started = time.monotonic()
        print(sorted(launch(where_am_i, where, args=(600,), authority=0, grace_s=1, timeout_s=60,
                            host_env={"h1": {"TF_TEST_MARK": "odd"}}).items()), where.hosts)
        print(f"{time.monotonic() - started:.1f}", lab.exec("h0", ["true"]).returncode)  # still up after it
"""


@pytest.mark.timeout(120)
def test_a_running_lab_runs_a_scripts_own_function_with_one_hosts_variables(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from tensorfabric.lab.netlink import privileges_missing

    if privileges_missing():
        pytest.skip(f"a lab needs namespaces: {privileges_missing()}")
    script = tmp_path / "in_lab.py"
    script.write_text(IN_A_RUNNING_LAB)
    env = {**os.environ, "TENSORFABRIC_LAB_DIR": str(tmp_path / "state"), "PYTHONPATH": str(SRC.parent)}
    done = subprocess.run([sys.executable, str(script), f"ol{os.getpid() % 100000}"], env=env, capture_output=True,
                          text=True, timeout=100, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    results, seconds = done.stdout.splitlines()
    assert results == ("[(0, ('h0', None)), (1, ('h1', 'odd'))] ('h0', 'h1', 'h2')")
    assert float(seconds.split()[0]) < 30 and seconds.split()[1] == "0"  # not the straggler's 600 s
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == []  # the lab is gone
