"""The README's exit-code table, row by row: 0 fine, 1 found problems, 2 bad input or an environment to fix.

Each row runs the real CLI and checks its exit code, that stderr holds no traceback, and (where given) a word
the one-line message must contain. Rows marked ``ns`` need a mount or network namespace (a read-only or full
directory, a host name that cannot resolve without leaving this machine) and run ``python -m tensorfabric`` in
one through ``unshare``; they need root and skip otherwise. The README table is checked against this list.
"""

from __future__ import annotations

import os
import re
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
TINY = ["--layers", "1", "--hidden", "32", "--heads", "2", "--kv-heads", "1", "--vocab", "300"]


@dataclass(frozen=True)
class Row:
    argv: str
    code: int
    needle: str = ""
    env: dict[str, str] = field(default_factory=dict)
    ns: str = ""
    """"ro": {dir} is a read-only tmpfs; "full": {dir} is a 16 KiB tmpfs; "net": no network at all."""


ROWS: list[Row] = [
    # the CLI itself
    Row("--version", 0),
    Row("frobnicate", 2, "frobnicate"),
    Row("bench --no-such-flag", 2, "--no-such-flag"),
    # env
    Row("env --sysfs-root {sysfs}/mlx5-roce --json", 0),
    Row("env --sysfs-root {sysfs}/mlx5-roce --format dotenv", 0),
    Row("env --sysfs-root {tmp}/missing", 2, "missing"),
    Row("env --roce-dscp 64", 2, "--roce-dscp"),
    Row("env --fabric {tmp}/missing.yaml", 2, "missing.yaml"),
    # doctor
    Row("doctor --sysfs-root {sysfs}/mlx5-roce --json", 0, env={"NCCL_IB_TC": "106"}),
    Row("doctor --sysfs-root {sysfs}/mlx5-roce", 1),
    Row("doctor --sysfs-root {sysfs}/no-rdma --json", 1),
    Row("doctor --sysfs-root {sysfs}/mlx5-roce --nccl-log {tmp}/missing.log", 2, "missing.log"),
    Row("doctor --sysfs-root {sysfs}/mlx5-roce --nccl-log {binary}", 2),
    # fabric
    Row("fabric init -o {tmp}/new.yaml", 0),
    Row("fabric init -o {ex}/fabric.yaml", 2, "--force"),
    Row("fabric init --leaves 0", 2, "--leaves"),
    Row("fabric schema", 0),
    Row("fabric headroom --speed 400G --cable 5m --json", 0),
    Row("fabric headroom --fabric {ex}/fabric.yaml --json", 0),
    Row("fabric headroom --speed 400G", 2, "--cable"),
    Row("fabric headroom --speed 400G --cable -5m", 2, "positive length"),
    Row("fabric headroom --speed 400G --cable 5m --asic tofino", 2, "tofino"),
    Row("fabric lint {ex}/fabric.yaml --json", 0),
    Row("fabric lint --fabric {ex}/fabric.yaml", 0),
    Row("fabric lint {ex}/fabric-dscp-mismatch.yaml --json", 1),
    Row("fabric lint {empty}", 2, "no switches and no hosts"),
    Row("fabric lint {tmp}/missing.yaml", 2, "missing.yaml"),
    Row("fabric lint {ex}/fabric.yaml --rule nope", 2, "nope"),
    Row("fabric lint --deployed {binary}", 2, "UTF-8"),
    Row("fabric rules --json", 0),
    Row("fabric render {ex}/fabric.yaml --out {tmp}/configs --json", 0),
    Row("fabric render --fabric {empty} --out {tmp}/configs", 2, "no switches"),
    Row("fabric render --fabric {ex}/fabric.yaml --out {dir}/configs", 2, "read-only", ns="ro"),
    Row("fabric render --fabric {ex}/fabric.yaml --out {dir}/configs", 2, "not written", ns="full"),
    # simulate
    Row("simulate incast --duration 1ms --json", 0),
    Row("simulate incast --duration 1ms --headroom 1K --json", 1),
    Row("simulate incast --duration 1ms --no-pfc --json", 0),
    Row("simulate tornado", 2, "tornado"),
    Row("simulate incast --flows 0", 2, "--flows"),
    Row("simulate incast --dcqcn magic", 2, "magic"),
    Row("simulate incast --duration 1ms --plot {dir}/q.png", 2, "read-only", ns="ro"),
    # monitor
    Row("monitor --source replay:{ex}/healthy.jsonl --once --json", 0),
    Row("monitor --source replay:{ex}/storm.jsonl --links {ex}/links.yaml --polls 6 --interval 1ms --json", 1),
    Row("monitor --source sonic-redis:127.0.0.1:{closed_port} --once --json", 1),
    Row("monitor --source replay:{ex}/healthy.jsonl --once --serve 127.0.0.1:{busy_port}", 2, "in use"),
    Row("monitor --source replay:{ex}/healthy.jsonl --once --serve nohost.invalid:9108 --allow-remote", 2,
        "--serve", ns="net"),
    Row("monitor --source replay:{ex}/healthy.jsonl --once --links {binary}", 2, "UTF-8"),
    Row("monitor", 2, "--source"),
    Row("monitor --source nope:x --once", 2, "nope"),
    Row("monitor --source replay:{ex}/healthy.jsonl --detector nope", 2, "nope"),
    Row("monitor --source replay:{ex}/healthy.jsonl --interval 0s", 2, "--interval"),
    Row("monitor --source replay:{ex}/healthy.jsonl --once --set bogus=1", 2, "bogus"),
    Row("monitor --source replay:{ex}/healthy.jsonl --once --record {dir}/rec.jsonl", 2, "read-only", ns="ro"),
    # bench
    Row("bench --timeout 120s --max 1K --iters 1 --warmup 0 --json", 0),
    Row("bench --timeout inf", 2, "--timeout"),
    Row("bench --timeout 0s", 2, "--timeout"),
    Row("bench --codec zip", 2, "zip"),
    Row("bench --min 1M --max 1K", 2, "--min"),
    Row("bench --max 1P", 2, "memory"),
    Row("bench --nproc 0", 2, "--nproc"),
    Row("bench --op all_to_all --codec int8", 2, "all_to_all"),
    Row("bench --max 1K --plot {dir}/busbw.png", 2, "read-only", ns="ro"),
    # run and model
    Row("model make-tiny {tmp}/tiny " + " ".join(TINY) + " --json", 0),
    Row("model make-tiny {tmp}/tiny2 --layers 0", 2, "--layers"),
    Row("model info {tmp}/missing", 2, "missing"),
    Row("run --model {tmp}/missing --tp 1", 2, "missing"),
    Row("run --tp 0", 2, "--tp"),
    Row("run --timeout inf", 2, "--timeout"),
    Row("run --codec zip", 2, "zip"),
    Row("run --top-p 0", 2, "--top-p"),
    # lab (bad input fails before any namespace is made)
    Row("lab up --hosts 0 --rate 1gbit", 2, "--hosts"),
    Row("lab up --hosts 2 --rate fast", 2, "fast"),
    Row("lab up --hosts 2 --rate 1gbit --mtu 100", 2, "--mtu"),
    Row("lab down", 2, "--all"),
    Row("lab down tf19-no-such-lab --json", 2, "does not exist"),
    Row("lab status tf19-no-such-lab", 2, "does not exist"),
    Row("lab exec tf19-no-such-lab h0 -- true", 2, "does not exist"),
    Row("lab list --json", 0),
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
    yield {"tmp": str(tmp), "ex": str(EX), "sysfs": str(SYSFS), "empty": str(tmp / "empty.yaml"),
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


def test_readme_table_is_this_table() -> None:
    """Every row of the README's exit-code table is a row here (commands written as a user types them)."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("<!-- exit-codes -->"):readme.index("<!-- /exit-codes -->")]
    documented = re.findall(r"^\| `tensorfabric ([^`]+)` \| (\d) \|", table, flags=re.M)
    assert len(documented) >= 40
    ours = {(r.argv, r.code) for r in ROWS}
    missing = [(argv, int(code)) for argv, code in documented if (argv, int(code)) not in ours]
    assert missing == []
