"""How close the lab's shaped links come to their line rate, and whether its counters tell the truth.

Measures, in one run (needs root for the namespaces; prints why and exits 0 otherwise):

1. bulk TCP (``tensorfabric.lab.tcpbulk``) across a 2-host star at 200 Mbit/s (MTU 9000, the lab default, and
   1500) and 1 Gbit/s: goodput, and the wire rate implied by the sender's tbf byte counter; goal: goodput
   within 10 % of 200 Mbit/s.
2. ``tensorfabric bench --lab 2x1gbit --op all_reduce`` at 64 MiB: busbw against the 1 Gbit/s line rate;
   goal >= 85 %.
3. the same at 16 MiB with ``--codec int8`` against uncompressed; goal: speedup >= 1.8x.
4. counters: ``bench --op all_reduce`` ranks spawned in a lab, ``lab status`` read before and after, the
   bytes each host sent against the bytes the collectives moved; and the same for a plain Gloo loop whose
   byte count is known exactly. Goal: within 5 %.

Usage: ``.venv/bin/python benchmarks/lab_line_rate.py [--skip-bench]``. Writes
``benchmarks/results/lab_line_rate.json``. Timings on a shared 2-core machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tensorfabric.errors import LabError
from tensorfabric.fsutil import atomic_write_json
from tensorfabric.lab import Lab
from tensorfabric.lab.netlink import check_privileges

RESULTS = Path(__file__).resolve().parent / "results" / "lab_line_rate.json"
PY = sys.executable
MIB = 1 << 20

_GLOO_LOOP = """
import os, sys, time, torch, torch.distributed as dist
from datetime import timedelta
dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=120))
size, iters = int(sys.argv[1]), int(sys.argv[2])
t = torch.ones(size // 4, dtype=torch.float32)
dist.barrier()
start = time.monotonic()
for _ in range(iters):
    dist.all_reduce(t)
dist.barrier()
if dist.get_rank() == 0:
    print(time.monotonic() - start)
dist.destroy_process_group()
"""


def _tx(status: dict[str, Any]) -> list[int]:
    """Bytes each host has sent into its link (host end of the host's link)."""
    return [link["ends"][0]["tx_bytes"] for link in status["links"] if link["a"].endswith(":eth0")]


def _run_ranks(lab: Lab, argv: list[str], timeout_s: float) -> tuple[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        outs = [open(Path(tmp, f"{r}.out"), "w+") for r in range(len(lab.hosts))]  # noqa: SIM115
        errs = [open(Path(tmp, f"{r}.err"), "w+") for r in range(len(lab.hosts))]  # noqa: SIM115
        start = time.monotonic()
        procs = [lab.popen(h, argv, env=env, stdout=outs[r], stderr=errs[r])
                 for r, (h, env) in enumerate(zip(lab.hosts, lab.rank_envs(), strict=True))]
        codes = [p.wait(timeout=timeout_s) for p in procs]
        elapsed = time.monotonic() - start
        for handle in (*outs, *errs):
            handle.seek(0)
        if any(codes):
            raise RuntimeError(f"ranks failed {codes}: {[e.read()[-1500:] for e in errs]}")
        return outs[0].read(), elapsed


def tcp(rate: str, rate_bps: float, seconds: float, mtu: int) -> dict[str, Any]:
    nbytes = int(rate_bps / 8 * seconds)
    with Lab(hosts=2, rate=rate, mtu=mtu) as lab:
        before = lab.status().to_dict()["links"][0]["ends"][0]
        recv = lab.popen("h1", [PY, "-m", "tensorfabric.lab.tcpbulk", "recv", "--bytes", str(nbytes)],
                         stdout=subprocess.PIPE, text=True)
        start = time.monotonic()
        sent = lab.exec("h0", [PY, "-m", "tensorfabric.lab.tcpbulk", "send", "--to", lab.address("h1"),
                               "--bytes", str(nbytes)], timeout_s=120)
        wall = time.monotonic() - start
        got = json.loads(recv.communicate(timeout=60)[0])
        after = lab.status().to_dict()["links"][0]["ends"][0]
    assert sent.returncode == 0, sent.stderr
    wire_bytes = after["qdisc"]["bytes"] - before["qdisc"]["bytes"]
    # Wire rate = goodput scaled by the frame bytes tbf charged per payload byte (headers, ACK-free direction);
    # the sender's own wall clock includes interpreter start-up, so it only bounds the run.
    wire_bps = got["bps"] * wire_bytes / nbytes
    return {"rate": rate, "mtu": mtu, "bytes": nbytes, "goodput_bps": got["bps"],
            "goodput_vs_rate": got["bps"] / rate_bps,
            "wire_bps": wire_bps, "wire_vs_rate": wire_bps / rate_bps, "sender_wall_s": wall,
            "wire_bytes_per_payload_byte": wire_bytes / nbytes, "qdisc_drops": after["qdisc"]["drops"],
            "overlimits": after["qdisc"]["overlimits"] - before["qdisc"]["overlimits"]}


def bench_via_lab(extra: list[str], timeout_s: float = 600) -> dict[str, Any]:
    argv = [PY, "-m", "tensorfabric", "bench", "--lab", "2x1gbit", "--op", "all_reduce", *extra, "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[2:])} failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def counters_bench(size: int, warmup: int, iters: int) -> dict[str, Any]:
    argv = [PY, "-m", "tensorfabric", "bench", "--op", "all_reduce", "--min", str(size), "--max", str(size),
            "--warmup", str(warmup), "--iters", str(iters), "--json"]
    with Lab(hosts=2, rate="1gbit") as lab:
        before = _tx(lab.status().to_dict())
        out, _ = _run_ranks(lab, argv, timeout_s=600)
        after = _tx(lab.status().to_dict())
    sent = [a - b for a, b in zip(after, before, strict=True)]
    # Ring all_reduce on n ranks: each rank sends 2(n-1)/n of the buffer per call (nccl-tests' bus factor),
    # one buffer for n = 2. The bench runs warmup + iters timed calls and one more to check the result.
    expected = (warmup + iters + 1) * size
    return {"size": size, "warmup": warmup, "iters": iters, "expected_bytes_per_rank": expected,
            "tx_bytes_per_host": sent, "ratio": [s / expected for s in sent], "bench": json.loads(out)}


def counters_gloo(size: int, iters: int) -> dict[str, Any]:
    with Lab(hosts=2, rate="1gbit") as lab:
        before = _tx(lab.status().to_dict())
        out, _ = _run_ranks(lab, [PY, "-c", _GLOO_LOOP, str(size), str(iters)], timeout_s=300)
        after = _tx(lab.status().to_dict())
    sent = [a - b for a, b in zip(after, before, strict=True)]
    expected = iters * size  # 2 ranks: 2(n-1)/n = 1 buffer per rank per all_reduce
    seconds = float(out.strip())
    return {"size": size, "iters": iters, "expected_bytes_per_rank": expected, "tx_bytes_per_host": sent,
            "ratio": [s / expected for s in sent], "seconds": seconds,
            "busbw_bps": iters * size * 8 / seconds, "busbw_vs_line_rate": iters * size * 8 / seconds / 1e9}


def _row(result: dict[str, Any], size: int) -> dict[str, Any]:
    return next(r for r in result["rows"] if int(r["size"]) == size)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-bench", action="store_true", help="only TCP and the Gloo counter check")
    args = parser.parse_args()
    try:
        check_privileges()
    except LabError as exc:
        print(f"lab_line_rate: skipped: {exc}")
        return 0
    results: dict[str, Any] = {"machine": {"python": platform.python_version(), "node": platform.node()},
                               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    t0 = time.monotonic()
    results["lab_up_down_s"] = {}
    for hosts in (2, 8, 16):
        start = time.monotonic()
        with Lab(hosts=hosts, rate="1gbit"):
            up = time.monotonic() - start
        results["lab_up_down_s"][str(hosts)] = {"up": up, "up_and_down": time.monotonic() - start}
    results["tcp"] = [tcp("200mbit", 200e6, 4.0, 9000), tcp("200mbit", 200e6, 4.0, 1500), tcp("1gbit", 1e9, 4.0, 9000)]
    for row in results["tcp"]:
        print(f"tcp {row['rate']:>8} mtu {row['mtu']}: goodput {row['goodput_bps'] / 1e6:7.1f} Mbit/s "
              f"({row['goodput_vs_rate']:.1%} of rate), wire {row['wire_bps'] / 1e6:7.1f} Mbit/s "
              f"({row['wire_vs_rate']:.1%})")
    results["counters_gloo"] = counters_gloo(64 * MIB, 5)
    g = results["counters_gloo"]
    print(f"gloo all_reduce 64MiB x{g['iters']}: busbw {g['busbw_bps'] / 1e6:.0f} Mbit/s "
          f"({g['busbw_vs_line_rate']:.1%} of line), counters/expected {[f'{r:.4f}' for r in g['ratio']]}")
    if not args.skip_bench:
        big = bench_via_lab(["--min", "64M", "--max", "64M"])
        busbw = float(_row(big, 64 * MIB)["busbw"]) * 8e9  # GB/s (1e9 bytes/s) -> bit/s
        plain = bench_via_lab(["--min", "16M", "--max", "16M"])
        int8 = bench_via_lab(["--min", "16M", "--max", "16M", "--codec", "int8"])
        speedup = float(_row(plain, 16 * MIB)["time_us"]) / float(_row(int8, 16 * MIB)["time_us"])
        results["bench_lab"] = {"all_reduce_64MiB": big, "busbw_bps": busbw, "busbw_vs_line_rate": busbw / 1e9,
                                "all_reduce_16MiB": plain, "int8_16MiB": int8, "int8_speedup": speedup}
        print(f"bench --lab 2x1gbit all_reduce 64MiB: busbw {busbw / 1e6:.0f} Mbit/s ({busbw / 1e9:.1%} of line)")
        print(f"int8 codec at 16MiB: {speedup:.2f}x faster than uncompressed")
        results["counters_bench"] = counters_bench(64 * MIB, 1, 5)
        c = results["counters_bench"]
        print(f"bench ranks in a lab, counters/expected {[f'{r:.4f}' for r in c['ratio']]}")
    results["total_s"] = time.monotonic() - t0
    atomic_write_json(RESULTS, results)
    print(f"wrote {RESULTS} in {results['total_s']:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
