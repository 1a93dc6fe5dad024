"""Measure ``tensorfabric fleet``: the offline check over 10,000 reports, and the 8-host lab run.

``python benchmarks/fleet_check.py`` writes 10,000 ``doctor --json`` reports (the ConnectX-7 fixture host, one file
per host, as a DaemonSet leaves them) to a temporary directory, mutates 1 % of them (each one of the faults below),
runs ``tensorfabric fleet check DIR --json`` as a user would (a fresh process: start-up included) and in-process,
and checks that the hosts named are exactly the mutated ones. Results: benchmarks/results/fleet_check.json.

``python benchmarks/fleet_check.py --lab`` (root) builds an 8-host lab (8x1gbit), shapes one host's link to
100 Mbit/s, sets another's MTU to 1500 and a third's NCCL_IB_GID_INDEX, runs ``tensorfabric fleet --lab-name``,
then undoes the faults and runs it again; it records each run's timing breakdown (bring-up, start-up, doctor,
torch import, rendezvous, reports, rounds) in benchmarks/results/fleet_lab.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "tests" / "fixtures" / "fleet" / "daemonset" / "gpu-a01.json"
RESULTS = ROOT / "benchmarks" / "results"
Doc = dict[str, Any]


def _port(doc: Doc, name: str) -> Doc:
    return next(p for p in doc["host"]["rdma_ports"] if p["port"] == name)


def _mtu(doc: Doc) -> None:
    _port(doc, "mlx5_1:1")["mtu"] = 1500
    doc["data_netdevs"]["ens1f1np1"]["mtu"] = 1500


def _speed(doc: Doc) -> None:
    _port(doc, "mlx5_0:1")["speed_mbps"] = 100000
    doc["data_netdevs"]["ens1f0np0"]["speed_mbps"] = 100000


def _env(key: str, value: str) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        doc["environment"][key] = value
    return apply


def _software(key: str, value: str) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        doc["software"][key] = value
    return apply


def _firmware(doc: Doc) -> None:
    _port(doc, "mlx5_0:1")["fw_ver"] = "28.36.1010"


def _port_down(doc: Doc) -> None:
    _port(doc, "mlx5_1:1")["state"] = "1: DOWN"


def _loopback(doc: Doc) -> None:
    doc["host"]["hostname"]["addresses"] = ["127.0.1.1"]


def _doctor_only(doc: Doc) -> None:
    doc["findings"].append({"rule": "roce.pfc-off", "severity": "error", "subject": "ens1f0np0",
                            "message": "PFC is off on the lossless priority 3", "evidence": {}, "fix": "mlnx_qos"})


MUTATIONS: dict[str, Callable[[Doc], None]] = {
    "mtu-1500": _mtu, "link-100g": _speed, "gid-index-env": _env("NCCL_IB_GID_INDEX", "5"),
    "traffic-class-env": _env("NCCL_IB_TC", "0"), "ib-hca-missing": _env("NCCL_IB_HCA", "=mlx5_0:1,mlx5_4:1"),
    "nccl-version": _software("nccl", "2.23.4"), "kernel": _software("kernel", "6.8.0-45-generic"),
    "firmware": _firmware, "port-down": _port_down, "hostname-loopback": _loopback, "doctor-only": _doctor_only,
    "nccl-proto": _env("NCCL_PROTO", "LL128"),
}


def write_fleet(directory: Path, hosts: int, fraction: float, seed: int) -> dict[str, str]:
    """``hosts`` report files; returns host -> mutation for the mutated ones."""
    template = json.loads(TEMPLATE.read_text())
    rng = random.Random(seed)
    mutated = {i: rng.choice(sorted(MUTATIONS)) for i in rng.sample(range(hosts), int(hosts * fraction))}
    names = {}
    for i in range(hosts):
        doc = copy.deepcopy(template)
        name = f"gpu-{i:05d}"
        doc["host"]["hostname"] = {"name": name, "addresses": [f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"],
                                   "error": None}
        if i in mutated:
            MUTATIONS[mutated[i]](doc)
            names[name] = mutated[i]
        (directory / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
    return names


def offline(hosts: int, fraction: float, seed: int) -> dict[str, Any]:
    from tensorfabric.fleet.check import check_fleet
    from tensorfabric.fleet.reports import read_reports

    with tempfile.TemporaryDirectory(prefix="tf-fleet-bench-") as tmp:
        directory = Path(tmp)
        t = time.perf_counter()
        mutated = write_fleet(directory, hosts, fraction, seed)
        write_s = time.perf_counter() - t
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "tensorfabric", "fleet", "check", str(directory), "--json"],
                              capture_output=True, text=True, check=False, timeout=600)
        cli_s = time.perf_counter() - t
        doc = json.loads(proc.stdout)
        t = time.perf_counter()
        found = read_reports([str(directory)])
        read_s = time.perf_counter() - t
        t = time.perf_counter()
        report = check_fleet(found.hosts, read=found)
        rules_s = time.perf_counter() - t
    named = {h for f in doc["findings"] for h in f["evidence"].get("hosts", [])}
    per_mutation: dict[str, dict[str, int]] = {}
    for host, kind in mutated.items():
        entry = per_mutation.setdefault(kind, {"hosts": 0, "named": 0})
        entry["hosts"] += 1
        entry["named"] += host in named
    return {"hosts": hosts, "mutated": len(mutated), "cli_exit": proc.returncode, "cli_s": round(cli_s, 2),
            "in_process_read_s": round(read_s, 2), "in_process_rules_s": round(rules_s, 3),
            "write_s": round(write_s, 2), "cpus": os.cpu_count(), "findings": len(doc["findings"]),
            "named_every_mutated_host": set(mutated) <= named, "named_nothing_else": named <= set(mutated),
            "wrongly_named": sorted(named - set(mutated))[:10], "missed": sorted(set(mutated) - named)[:10],
            "per_mutation": per_mutation, "in_process_findings": len(report.findings)}


def _shape(ns: str, dev: str, rate: str) -> None:
    subprocess.run(["tc", "-n", ns, "qdisc", "change", "dev", dev, "root", "tbf", "rate", rate, "burst", "74536",
                    "latency", "25ms"], check=True)


def _run_fleet(name: str, extra: list[str]) -> dict[str, Any]:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tensorfabric", "fleet", "--lab-name", name, "--bytes", "2MiB",
                           "--timeout", "60s", "--engine", "torch", "--json", *extra],
                          capture_output=True, text=True, check=False, timeout=600)
    wall = time.perf_counter() - t
    doc = json.loads(proc.stdout)
    return {"exit": proc.returncode, "wall_s": round(wall, 2),
            "timings_s": {k: round(v, 2) for k, v in doc["timings_s"].items()},
            "named": sorted({f"{f['rule']} {f['subject']}" for f in doc["findings"]})}


def lab() -> dict[str, Any]:
    name = f"fb{os.getpid() % 100000}"
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tensorfabric", "lab", "up", "--name", name, "--hosts", "8", "--rate",
                    "1gbit"], check=True, capture_output=True)
    bring_up = time.perf_counter() - t
    try:
        _shape(f"tf-{name}-h2", "eth0", "100mbit")
        _shape(f"tf-{name}-sw0", "h2", "100mbit")
        subprocess.run(["ip", "-n", f"tf-{name}-h4", "link", "set", "eth0", "mtu", "1500"], check=True)
        faulty = _run_fleet(name, ["--host-env", "h6:NCCL_IB_GID_INDEX=5"])
        _shape(f"tf-{name}-h2", "eth0", "1gbit")
        _shape(f"tf-{name}-sw0", "h2", "1gbit")
        subprocess.run(["ip", "-n", f"tf-{name}-h4", "link", "set", "eth0", "mtu", "9000"], check=True)
        clean = _run_fleet(name, [])
    finally:
        subprocess.run([sys.executable, "-m", "tensorfabric", "lab", "down", name], check=False, capture_output=True)
    return {"hosts": 8, "rate": "1gbit", "bring_up_s": round(bring_up, 2), "cpus": os.cpu_count(), "faulty": faulty,
            "clean": clean}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", action="store_true", help="the 8-host lab run instead (root)")
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--fraction", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=31)
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.lab:
        result = lab()
        out = RESULTS / "fleet_lab.json"
    else:
        result = offline(args.hosts, args.fraction, args.seed)
        out = RESULTS / "fleet_check.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
