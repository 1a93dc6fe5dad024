"""Arista EOS configuration for one switch: DSCP and TX-queue maps, a QoS profile per port speed, watchdog.

The QoS profile (``qos profile``, applied with ``service-profile``) carries trust, PFC no-drop priorities, the
ECN thresholds of the lossless queues, strict priority for the CNP queue and ETS shares; EOS sizes PFC
headroom itself, so no buffer values are rendered. Watchdog timers are global (seconds) and the watchdog is
switched on in the profile of lossless ports.
"""

from __future__ import annotations

from tensorfabric import roce
from tensorfabric.fabric.deployed import EcnProfile
from tensorfabric.fabric.plan import PortPlan, SwitchPlan
from tensorfabric.fabric.renderers._escape import cli_name, cli_text, comment
from tensorfabric.fabric.renderers._text import GENERATED, group_interfaces, number, speed_label

__all__ = ["EXTENSION", "TARGET", "render"]

TARGET = "eos"
EXTENSION = "eos"
_TRUST = {"dscp": "dscp", "pcp": "cos"}
_ACTION = {"drop": "drop", "alert": "notify-only", "forward": "notify-only"}


def _profile(plan: SwitchPlan, name: str, ecn: EcnProfile, lossless: bool) -> list[str]:
    out = [f"qos profile {name}", f"   qos trust {_TRUST[plan.trust]}"]
    if lossless:
        out.append("   priority-flow-control on")
        out += [f"   priority-flow-control priority {p} no-drop" for p in plan.lossless]
        out.append("   " + ("" if plan.watchdog.enabled else "no ") + "priority-flow-control pause watchdog")
    for queue in range(8):
        lines = []
        if queue in plan.strict:
            lines.append("      priority strict")
        elif queue in plan.ets:
            lines.append(f"      bandwidth percent {plan.ets[queue]}")
        if queue in plan.lossless and lossless and ecn.ecn:
            lines.append(f"      random-detect ecn minimum-threshold {ecn.kmin_bytes} bytes maximum-threshold "
                         f"{ecn.kmax_bytes} bytes max-mark-probability {number(ecn.pmax_percent)} weight 0")
        if lines:
            out += [f"   uc-tx-queue {queue}", *lines]
    return out + ["!"]


def _profile_name(port: PortPlan) -> str:
    return f"ROCE_{speed_label(port.speed_bps)}" + ("" if port.lossless else "_LOSSY")


def render(plan: SwitchPlan) -> str:
    out = [f"! {comment(plan.name, 'switches name')}: Arista EOS, {GENERATED}",
           f"hostname {cli_name(plan.name, 'switches name')}", "!"]
    by_tc: dict[int, list[int]] = {}
    for dscp in range(64):
        by_tc.setdefault(plan.dscp_to_priority.get(dscp, 0), []).append(dscp)
    for tc, dscps in sorted(by_tc.items()):
        for start in range(0, len(dscps), 16):  # keep lines short enough for the CLI
            out.append(f"qos map dscp {' '.join(map(str, dscps[start:start + 16]))} to traffic-class {tc}")
    out += [f"qos map traffic-class {tc} to tx-queue {tc}" for tc in range(8)]
    out.append("!")
    done: set[str] = set()
    for port in plan.ports:
        name = _profile_name(port)
        if name not in done:
            done.add(name)
            out += _profile(plan, name, port.ecn, port.lossless)
    wd = plan.watchdog
    if wd.enabled:
        prefix = "priority-flow-control pause watchdog"
        out += [f"{prefix} default timeout {number((wd.detection_ms or roce.PFCWD_DETECTION_MS) / 1000)}",
                f"{prefix} default recovery-time {number((wd.restoration_ms or roce.PFCWD_RESTORATION_MS) / 1000)}",
                f"{prefix} default polling-interval {number((wd.polling_ms or roce.PFCWD_POLL_MS) / 1000)}",
                f"{prefix} action {_ACTION.get(wd.action or roce.PFCWD_ACTION, roce.PFCWD_ACTION)}", "!"]
    blocks = [(port.name, tuple([f"   description {cli_text(port.peer, 'link peer')}"] if port.peer else [])
                                + (f"   mtu {port.mtu}", f"   service-profile {_profile_name(port)}"))
              for port in plan.ports]
    for name, body in group_interfaces(blocks):
        out += [f"interface {cli_name(name, f'switches[{plan.name}].ports')}", *body, "!"]
    out.append("end")
    return "\n".join(out) + "\n"
