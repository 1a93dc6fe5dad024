"""Fixed measurements for the run, disaggregated-run and lab-status reports (tests/test_reports_*.py).

The golden files in tests/fixtures/reports/ are what the verbs printed from these inputs before the reports
became records (the dict-building code of commit 9a5d13d, run on exactly these inputs): the records' ``--json``
must stay byte-identical to them, and their human form too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tensorfabric.inference.disagg import DisaggConfig, DisaggRankResult
from tensorfabric.inference.runner import RankResult, RunConfig
from tensorfabric.lab.plan import LabPlan, plan_lab
from tensorfabric.lab.spec import LabSpec

GOLDEN = Path(__file__).parent / "fixtures" / "reports"
TINY_DIR = "/models/tiny-llama-l4-h256-v512-s0"


def _comm(calls: int, seconds: float, codecs: list[str], nixl: int = 0, wait: float = 0.0,
          late: float | None = 0.0) -> dict[str, Any]:
    return {"calls": calls, "bytes": calls * 4096, "wire_bytes": calls * 1100 if "int8" in codecs else calls * 4096,
            "seconds": seconds, "codecs": codecs, "wait_seconds": wait, "nixl_calls": nixl, "late_seconds": late}


def rank_result(batch: int = 1) -> RankResult:
    """Rank 0 of a tp=2 run: an int8 all-reduce partly through NIXL, an all-gather with unknown lateness."""
    ids = [[187, 407, 106, 9][: 4 - i] for i in range(batch)]
    comm = {"all_reduce": _comm(24, 0.0474471, ["int8", "none"], nixl=16, wait=0.0156051, late=0.0069805),
            "all_gather": _comm(6, 0.0018077, ["none"], late=None)}
    return RankResult(rank=0, token_ids=ids, ttft_s=0.0465221, step_s=[0.0166532, 0.0169601, 0.0151234],
                      step_comm_s=[0.0118875, 0.0121003, 0.0099921], prefill_comm_s=0.0254798, comm=comm,
                      transport="nixl/shm(sysv/memory,posix/memory)+gloo/tcp", load_s=0.066044,
                      shard_bytes=6038528, rss_baseline_bytes=1 << 20, rss_peak_bytes=2 << 20)


def run_config(batch: int = 1) -> RunConfig:
    prompts = ("The capital of France is", "bcd", "a")[:batch]
    return RunConfig(model_dir=TINY_DIR, tp=2, prompts=prompts, codec="int8", dtype="bfloat16", engine="auto")


def texts(batch: int = 1) -> list[str]:
    """What a random model decodes to: replacement characters, a control byte, an emoji-like word."""
    return ["\ufffdh :smile: [bold]x[/]", "tab\there\x1b[2J", "ok"][:batch]


def _send(i: int, rank: int) -> dict[str, Any]:
    return {"prompt_tokens": 37 + i, "kv_bytes": 20480 * (10 - i), "kv_blocks": 10 - i, "descriptors": 40 + rank,
            "writes": 4, "write_s": 0.000731 + 0.0001 * rank + 0.00002 * i, "pack_s": 0.00021 + 0.00001 * i,
            "prefill_compute_s": 0.0123 + 0.001 * i, "credit_wait_s": 0.00005 * (rank + i)}


def _recv(i: int) -> dict[str, Any]:
    return {"first_decode_step_s": 0.0041 + 0.0002 * i, "step_s": [0.0039, 0.0042, 0.0047 + 0.0001 * i],
            "kv_wait_s": 0.0009 + 0.0001 * i}


def disagg_results(requests: int = 2, prefill: int = 2) -> list[DisaggRankResult]:
    """``prefill`` prefill ranks then one decode rank, ``requests`` requests each."""
    ranks = [DisaggRankResult(rank=r, role="prefill", index=r, setup_s=0.0712 + 0.01 * r,
                              transport="nixl/shm(sysv/memory)", load_s=0.05 + 0.01 * r,
                              requests=[_send(i, r) for i in range(requests)]) for r in range(prefill)]
    ranks.append(DisaggRankResult(rank=prefill, role="decode", index=0, setup_s=0.0655,
                                  transport="nixl/shm(posix/memory)", load_s=0.061,
                                  requests=[_recv(i) for i in range(requests)],
                                  token_ids=[[5 + i, 6, 7] for i in range(requests)]))
    return ranks


def disagg_config(requests: int = 2, prefill: int = 2) -> DisaggConfig:
    run = RunConfig(model_dir=TINY_DIR, prompts=tuple(f"p{i}" for i in range(requests)), engine="torch")
    return DisaggConfig(run=run, prefill=prefill, decode=1, block_tokens=4)


def lab_plan(topology: str = "star") -> LabPlan:
    if topology == "star":
        return plan_lab(LabSpec.create(name="rep", hosts=2, rate="1gbit"))
    return plan_lab(LabSpec.create(name="rep", hosts=3, rate="1gbit", topology="leafspine", leaves=2, spines=2,
                                   uplink_rate="10gbit"))


class FakeNetlink:
    """Interfaces as ``Netlink.interfaces`` reads them: every end present with counters derived from its name,
    except ``missing`` (one interface name that is gone); one end without a root qdisc."""

    def __init__(self, plan: LabPlan, missing: str = "", bare: str = "") -> None:
        self.plan = plan
        self.missing = missing
        self.bare = bare

    def interfaces(self, ns: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for link in self.plan.links:
            for end in (link.a, link.b):
                if self.plan.netns(end.device) != ns or str(end) == self.missing:
                    continue
                seed = sum(map(ord, str(end)))
                qdisc = None if str(end) == self.bare else {
                    "kind": "tbf", "bytes": seed * 1000, "packets": seed, "drops": seed % 3, "overlimits": seed % 7,
                    "backlog": seed % 5 * 100, "qlen": seed % 5}
                out[end.port] = {"index": seed % 50, "mtu": 9000, "state": "UP", "qdisc": qdisc,
                                 "stats": {"tx_bytes": seed * 12345, "tx_packets": seed * 10, "tx_dropped": seed % 2,
                                           "rx_bytes": seed * 54321, "rx_packets": seed * 11, "rx_dropped": 0}}
        return out
