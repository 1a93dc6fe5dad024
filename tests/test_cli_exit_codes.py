"""The README's exit-code table, row by row: 0 fine, 1 found problems, 2 bad input or an environment to fix.

Each row runs the real CLI and checks its exit code, that stderr holds no traceback, and (where given) a word
the one-line message must contain. Rows marked ``ns`` need a mount or network namespace (a read-only or full
directory, a host name that cannot resolve without leaving this machine) and run ``python -m tensorfabric`` in
one through ``unshare``; they need root and skip otherwise. The README table is checked against this list.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tensorfabric.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
SYSFS = ROOT / "tests" / "fixtures" / "sysfs"


@dataclass(frozen=True)
class Row:
    argv: str
    code: int
    needle: str = ""
    env: dict[str, str] = field(default_factory=dict)
    ns: str = ""
    """"ro": {dir} is a read-only tmpfs; "full": {dir} is a 16 KiB tmpfs; "net": no network at all."""
    why: str = ""


ROWS: list[Row] = [
    # the CLI itself
    Row("--version", 0, why="prints the version"),
    Row("frobnicate", 2, "frobnicate", why="unknown verb"),
    Row("bench --no-such-flag", 2, "--no-such-flag", why="unknown flag"),
    # env
    Row("env --sysfs-root {sysfs}/mlx5-roce --json", 0, why="NCCL environment as JSON"),
    Row("env --sysfs-root {sysfs}/mlx5-roce --format dotenv", 0, why="the same as a .env file"),
    Row("env --sysfs-root {tmp}/missing", 2, "missing", why="missing sysfs root"),
    Row("env --roce-dscp 64", 2, "--roce-dscp", why="DSCP out of 0..63"),
    Row("env --fabric {tmp}/missing.yaml", 2, "missing.yaml", why="missing spec"),
    # doctor
    Row("doctor --sysfs-root {sysfs}/mlx5-roce --json", 0, env={"NCCL_IB_TC": "106"},
        why="healthy host (NCCL_IB_TC set)"),
    Row("doctor --sysfs-root {sysfs}/mlx5-roce", 1, why="error finding: NCCL_IB_TC unset"),
    Row("doctor --sysfs-root {sysfs}/no-rdma --json", 1, why="error finding: no RDMA device"),
    Row("doctor --sysfs-root {sysfs}/mlx5-roce --nccl-log {tmp}/missing.log", 2, "missing.log", why="missing NCCL log"),
    Row("doctor --sysfs-root {sysfs}/mlx5-roce --nccl-log {binary}", 2, why="binary file as NCCL log"),
    # fabric
    Row("fabric init -o {tmp}/new.yaml", 0, why="starter spec written"),
    Row("fabric init -o {ex}/fabric.yaml", 2, "--force", why="refuses to overwrite without --force"),
    Row("fabric init --leaves 0", 2, "--leaves", why="integer out of range"),
    Row("fabric schema", 0, why="JSON Schema"),
    Row("fabric headroom --speed 400G --cable 5m --json", 0, why="one link's headroom"),
    Row("fabric headroom --fabric {ex}/fabric.yaml --json", 0, why="per port of a spec"),
    Row("fabric headroom --speed 400G", 2, "--cable", why="--cable missing"),
    Row("fabric headroom --speed 400G --cable -5m", 2, "positive length", why="negative length"),
    Row("fabric headroom --speed 400G --cable 5m --asic tofino", 2, "tofino",
        why="unknown ASIC (choices from the registry)"),
    Row("fabric lint --fabric {ex}/fabric.yaml --json", 0, why="clean spec"),
    Row("fabric lint {ex}/fabric.yaml", 2, "unexpected extra argument",
        why="a positional spec: the spec is only ever --fabric FILE"),
    Row("fabric lint --fabric {ex}/fabric-dscp-mismatch.yaml --json", 1, why="error finding"),
    Row("fabric lint --fabric {empty}", 2, "no switches and no hosts", why="empty spec"),
    Row("fabric lint --fabric {tmp}/missing.yaml", 2, "missing.yaml", why="missing spec"),
    Row("fabric lint --fabric {ex}/fabric.yaml --rule nope", 2, "nope", why="unknown rule id"),
    Row("fabric lint --deployed {binary}", 2, "not text", why="binary deployed config"),
    Row("fabric rules --json", 0, why="rule list"),
    Row("fabric render --fabric {ex}/fabric.yaml --out {tmp}/configs --json", 0, why="configs written"),
    Row("fabric render --out {tmp}/configs", 2, "--fabric", why="no spec given"),
    Row("fabric render --fabric {empty} --out {tmp}/configs", 2, "no switches", why="empty spec"),
    Row("fabric render --fabric {ex}/fabric.yaml --out {dir}/configs", 2, "read-only", ns="ro",
        why="read-only output directory"),
    Row("fabric render --fabric {ex}/fabric.yaml --out {dir}/configs", 2, "not written", ns="full",
        why="disk full: says which files were and were not written"),
    # simulate
    Row("simulate incast --duration 1ms --json", 0, why="lossless incast, nothing dropped"),
    Row("simulate incast --duration 1ms --headroom 1K --json", 1, why="bytes dropped with PFC on"),
    Row("simulate incast --duration 1ms --no-pfc --json", 0, why="lossy by request: drops are expected"),
    Row("simulate tornado", 2, "tornado", why="unknown scenario"),
    Row("simulate incast --flows 0", 2, "--flows", why="integer out of range"),
    Row("simulate incast --dcqcn magic", 2, "magic", why="unknown DCQCN form"),
    Row("simulate incast --duration 1ms --counters {dir}/c.jsonl --plot {dir}/q.png", 2, "not written", ns="full",
        why="disk full: says which files were and were not written"),
    Row("simulate incast --duration 1ms --plot {dir}/q.png", 2, "read-only", ns="ro", why="read-only output directory"),
    # monitor
    Row("monitor --source replay:{ex}/healthy.jsonl --once --json", 0, why="healthy counters"),
    Row("monitor --source replay:{ex}/storm.jsonl --links {ex}/links.yaml --polls 6 --interval 1ms --json", 1,
        why="pause-storm alert"),
    Row("monitor --source sonic-redis:127.0.0.1:{closed_port} --once --json", 1, why="the only source failed"),
    Row("monitor --source replay:{ex}/healthy.jsonl --once --serve 127.0.0.1:{busy_port}", 2, "in use",
        why="busy port"),
    Row("monitor --source replay:{ex}/healthy.jsonl --once --serve nohost.invalid:9108 --allow-remote", 2, "--serve",
        ns="net", why="unresolvable host"),
    Row("monitor --source replay:{ex}/healthy.jsonl --once --links {binary}", 2, "UTF-8", why="binary --links file"),
    Row("monitor", 2, "--source", why="no --source"),
    Row("monitor --source nope:x --once", 2, "nope", why="unknown source kind"),
    Row("monitor --source replay:{ex}/healthy.jsonl --detector nope", 2, "nope", why="unknown detector"),
    Row("monitor --source replay:{ex}/healthy.jsonl --interval 0s", 2, "--interval", why="zero interval"),
    Row("monitor --source replay:{ex}/healthy.jsonl --once --set bogus=1", 2, "bogus", why="unknown threshold"),
    Row("monitor --source replay:{ex}/healthy.jsonl --once --record {dir}/rec.jsonl", 2, "read-only", ns="ro",
        why="read-only output directory"),
    # bench
    Row("bench --timeout 120s --max 1K --iters 1 --warmup 0 --json", 0, why="sweep, every row validated"),
    Row("bench --timeout inf", 2, "--timeout", why="infinite timeout"),
    Row("bench --timeout 0s", 2, "--timeout", why="zero timeout"),
    Row("bench --codec zip", 2, "zip", why="unknown codec"),
    Row("bench --min 1M --max 1K", 2, "--min", why="min above max"),
    Row("bench --max 1T", 2, "memory", why="size this machine cannot allocate"),
    Row("bench --nproc 0", 2, "--nproc", why="integer out of range"),
    Row("bench --op all_to_all --codec int8", 2, "all_to_all", why="codec on an op without a compressed path"),
    Row("bench --max 1K --plot {dir}/busbw.png", 2, "read-only", ns="ro", why="read-only output directory"),
    # run and model
    Row("model make-tiny {tmp}/tiny --layers 1 --hidden 32 --heads 2 --kv-heads 1 --vocab 300 --json", 0,
        why="checkpoint written"),
    Row("model make-tiny {tmp}/tiny2 --layers 0", 2, "--layers", why="integer out of range"),
    Row("model info {tmp}/missing", 2, "missing", why="missing checkpoint"),
    Row("run --model tiny --tp 1 --max-new-tokens 2 --no-warmup --json", 0, why="the tiny model, made in the cache"),
    Row("run --model {tmp}/missing --tp 1", 2, "missing", why="missing checkpoint"),
    Row("run --tp 0", 2, "--tp", why="integer out of range"),
    Row("run --timeout inf", 2, "--timeout", why="infinite timeout"),
    Row("run --codec zip", 2, "zip", why="unknown codec"),
    Row("run --top-p 0", 2, "--top-p", why="top-p outside (0, 1]"),
    # lab (bad input fails before any namespace is made)
    Row("lab up --hosts 0 --rate 1gbit", 2, "hosts: 0", why="integer out of range"),
    Row("lab up --hosts 2 --rate fast", 2, "fast", why="not a rate"),
    Row("lab up --hosts 2 --rate 1gbit --mtu 100", 2, "mtu", why="MTU out of 576..9000"),
    Row("lab up --hosts 2 --rate 1gbit --topology leafspine --leaves 0", 2, "leaves", why="zero leaves"),
    Row("lab down", 2, "--all", why="neither NAME nor --all"),
    Row("lab down tf19-no-such-lab --json", 2, "does not exist", why="unknown lab"),
    Row("lab status tf19-no-such-lab", 2, "does not exist", why="unknown lab"),
    Row("lab exec tf19-no-such-lab h0 -- true", 2, "does not exist", why="unknown lab"),
    Row("lab list --json", 0, why="recorded labs"),
    # fleet (collected doctor reports; the online run needs a launcher or a lab)
    Row("fleet check {fleet}/daemonset/gpu-a01.json {fleet}/daemonset/gpu-a02.json --json", 0,
        why="two reports that agree"),
    Row("fleet check {fleet}/daemonset --json", 1, why="one host's MTU differs from the fleet's"),
    Row("fleet check {binary}", 2, "no doctor report", why="no report among the inputs"),
    Row("fleet --pairs star", 2, "--pairs", why="unknown pair mode"),
]


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("exit")
    (tmp / "empty.yaml").write_text("")
    (tmp / "blob.bin").write_bytes(bytes(range(256)) * 8)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    yield {"tmp": str(tmp), "ex": str(EX), "sysfs": str(SYSFS), "fleet": str(SYSFS.parent / "fleet"),
           "empty": str(tmp / "empty.yaml"),
           "binary": str(tmp / "blob.bin"), "busy_port": str(busy.getsockname()[1]),
           "closed_port": str(closed.getsockname()[1]), "dir": "/mnt/tf-exit-test"}
    busy.close()
    closed.close()


def _ns_command(row: Row, argv: list[str]) -> list[str]:
    cli = shlex.join([sys.executable, "-m", "tensorfabric", *argv])
    if row.ns == "net":
        return ["unshare", "--net", "sh", "-c", cli]
    options = "ro,size=64k" if row.ns == "ro" else "size=16k"
    script = f"mkdir -p /mnt/tf-exit-test && mount -t tmpfs -o {options} tf-exit /mnt/tf-exit-test && {cli}"
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("row", ROWS, ids=[f"{r.code}:{r.argv[:60]}" for r in ROWS])
def test_exit_code(row: Row, places: dict[str, str], capsys: pytest.CaptureFixture[str],
                   monkeypatch: pytest.MonkeyPatch) -> None:
    argv = shlex.split(row.argv.format(**places))
    for name, value in row.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_CACHE_HOME", places["tmp"] + "/cache")
    if row.ns:
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            pytest.skip("needs root and util-linux unshare for a private mount/network namespace")
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        done = subprocess.run(_ns_command(row, argv), capture_output=True, text=True, timeout=300, env=env,
                              cwd=places["tmp"])
        code, err = done.returncode, done.stderr
    else:
        code = main(argv)
        err = capsys.readouterr().err
    assert code == row.code, f"{row.argv}: exit {code}, stderr: {err[-2000:]}"
    assert "Traceback" not in err, err
    if row.needle:
        assert row.needle in err, err


def test_enough_rows_across_every_verb() -> None:
    from tensorfabric.cli.main import VERBS

    assert len(ROWS) >= 40
    assert {r.argv.split()[0] for r in ROWS} >= set(VERBS.names())
    assert {r.code for r in ROWS} == {0, 1, 2}


_SHOWN = {"{ex}": "examples", "{sysfs}": "tests/fixtures/sysfs", "{fleet}": "tests/fixtures/fleet", "{tmp}": "/tmp/t",
          "{empty}": "empty.yaml",
          "{binary}": "blob.bin", "{busy_port}": "9108", "{closed_port}": "6379"}


def shown(row: Row) -> str:
    """The row as the README writes it: real example paths, placeholders named for what they stand for."""
    text = row.argv.replace("{dir}", {"ro": "/mnt/readonly", "full": "/mnt/full"}.get(row.ns, "/mnt"))
    for key, value in _SHOWN.items():
        text = text.replace(key, value)
    return text


def readme_table() -> str:
    lines = ["| command | exit | why |", "|---|---|---|"]
    # A row's variables are part of the command a reader copies: without them it exits differently.
    lines += [f"| `{''.join(f'{k}={v} ' for k, v in r.env.items())}tensorfabric {shown(r)}` | {r.code} | {r.why} |"
              for r in ROWS]
    return "\n".join(lines)


def test_readme_table_is_this_table() -> None:
    """The README's exit-code table is exactly this list (regenerate it with ``readme_table()``)."""
    readme = (ROOT / "README.md").read_text()
    start, end = readme.index("<!-- exit-codes -->\n"), readme.index("<!-- /exit-codes -->")
    assert readme[start + len("<!-- exit-codes -->\n"):end].strip() == readme_table()


def test_lab_up_then_down_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tensorfabric.lab.netlink import privileges_missing

    if privileges_missing():
        pytest.skip(f"lab needs namespaces: {privileges_missing()}")
    monkeypatch.setenv("TENSORFABRIC_LAB_DIR", str(tmp_path / "state"))
    name = f"ec{os.getpid() % 100000}"
    assert main(["lab", "up", "--name", name, "--hosts", "2", "--rate", "1gbit", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == name
    assert main(["lab", "down", name, "--json"]) == 0
    removed = json.loads(capsys.readouterr().out)["removed"]
    assert removed and all(ns.startswith(f"tf-{name}-") for ns in removed)
    assert main(["lab", "down", name, "--json"]) == 2
