"""Shared helpers of the renderer/parser tests: spec paths and the plan-vs-deployed comparison."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from tensorfabric.fabric.deployed import Deployed
from tensorfabric.fabric.plan import HostPlan, SwitchPlan

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "fixtures" / "fabric" / "specs"
DEPLOYED = ROOT / "fixtures" / "fabric" / "deployed"
GOLDEN = ROOT / "golden" / "fabric"
GOLDEN_SPECS = ("reference", "nxos_snippet", "render-reference")


def switch_mismatches(plan: SwitchPlan, got: Deployed) -> list[str]:
    """Every way ``got`` (a parsed rendering) differs from the ``plan`` it was rendered from."""
    bad: list[str] = []

    def check(what: str, want: object, have: object) -> None:
        if want != have:
            bad.append(f"{plan.name} {what}: planned {want!r}, parsed {have!r}")

    check("device", plan.name, got.device)
    check("kind", "switch", got.kind)
    for port in plan.ports:
        dp = got.port(port.name)
        where = f"port {port.name}"
        check(f"{where} mtu", port.mtu, dp.mtu)
        check(f"{where} pfc", frozenset(plan.lossless) if port.lossless else frozenset(), dp.pfc_priorities)
        check(f"{where} trust", plan.trust, dp.trust)
        if plan.trust == "dscp":
            table = dp.dscp_to_priority or {}
            check(f"{where} dscp map", {d: plan.dscp_to_priority.get(d, 0) for d in range(64)},
                  {d: table.get(d, 0) for d in range(64)})
        check(f"{where} strict queues", frozenset(plan.strict), dp.strict_queues)
        if port.lossless and plan.ecn_enabled:
            for queue in plan.lossless:
                check(f"{where} ecn q{queue}", port.ecn, (dp.ecn or {}).get(got.queue_of(queue)))
        if port.lossless:
            wd = dp.watchdog
            check(f"{where} watchdog on", plan.watchdog.enabled, wd.enabled if wd else None)
            if plan.watchdog.enabled and wd is not None:
                check(f"{where} watchdog detection", plan.watchdog.detection_ms, wd.detection_ms)
                if got.format != "nvue":  # Cumulus restores after the detection time; documented in nvue.py
                    check(f"{where} watchdog restoration", plan.watchdog.restoration_ms, wd.restoration_ms)
        if port.headroom is not None and port.lossless and got.format in ("sonic", "nvue"):
            for prio in plan.lossless:
                check(f"{where} headroom pg{prio}", port.headroom, (dp.headroom or {}).get(prio))
        if port.cable_length_m is not None and got.format in ("sonic", "nvue"):
            check(f"{where} cable", math.ceil(port.cable_length_m) if got.format == "nvue" else port.cable_length_m,
                  dp.cable_length_m)
    if got.format == "nxos":
        rooms = [p.headroom for p in plan.ports if p.headroom is not None and p.lossless]
        if rooms:
            biggest = max(rooms, key=lambda r: r.size_bytes)
            # The renderer adds a resume hysteresis the plan does not carry; compare the sizes and thresholds.
            parsed = {p: replace(h, hysteresis_bytes=None) for p, h in got.headroom.items()}
            check("system headroom", {p: biggest for p in plan.lossless}, parsed)
            check("pause/resume hysteresis", True, all((h.hysteresis_bytes or 0) > 0 for h in got.headroom.values()))
    return bad


def host_mismatches(plan: HostPlan, got: Deployed) -> list[str]:
    bad: list[str] = []

    def check(what: str, want: object, have: object) -> None:
        if want != have:
            bad.append(f"{plan.name} {what}: planned {want!r}, parsed {have!r}")

    check("device", plan.name, got.device)
    check("kind", "host", got.kind)
    check("nccl env", dict(plan.nccl_env), dict(got.nccl_env))
    for nic in plan.nics:
        dp = got.port(nic.netdev)
        where = f"nic {nic.netdev}"
        mlx5 = nic.vendor.lower() in ("nvidia", "mellanox")
        check(f"{where} trust", nic.trust, dp.trust)
        check(f"{where} pfc", frozenset(nic.pfc), dp.pfc_priorities)
        check(f"{where} mtu", nic.mtu, dp.mtu)
        check(f"{where} link pause", nic.link_pause, dp.link_pause)
        if nic.trust == "dscp":
            table = dp.dscp_to_priority or {}
            default = (lambda d: d >> 3) if mlx5 else (lambda d: 0)
            check(f"{where} dscp map", {d: nic.dscp_explicit.get(d, default(d)) for d in range(64)},
                  {d: table.get(d) for d in range(64)})
        if not mlx5:
            continue  # DCQCN, CNP, storm prevention and DCBX have no vendor-neutral commands
        check(f"{where} cnp dscp", nic.cnp_dscp, dp.cnp_dscp)
        check(f"{where} cnp priority", nic.cnp_priority, dp.cnp_priority)
        check(f"{where} ecn priorities", frozenset(nic.ecn_priorities), dp.ecn_priorities)
        if nic.cable_length_m is not None:
            check(f"{where} cable", float(math.ceil(nic.cable_length_m)), dp.cable_length_m)
        if nic.storm_prevention_ms:
            check(f"{where} storm prevention", float(nic.storm_prevention_ms),
                  dp.watchdog.detection_ms if dp.watchdog else None)
            check(f"{where} storm prevention field", float(nic.storm_prevention_ms), dp.storm_prevention_ms)
        check(f"{where} dcbx", nic.dcbx, dp.dcbx)
    return bad
