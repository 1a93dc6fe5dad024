"""Cisco NX-OS (Nexus 9000, 8-queue mode) configuration for one switch.

Classification: one ``class-map type qos`` per priority that any DSCP (or, under PCP trust, CoS) maps to, set
into the matching ``qos-group`` by one ingress policy; with the ACL classifier the RoCE class also matches an
``ip access-list`` on the RoCE v2 UDP port. The ACL is deliberately not applied as an interface
``ip access-group ... in``: a permit-only ACL there would drop every non-RoCE packet. qos-group N is served by queue N
(``c-out-8q-qN``), so the CoS-to-queue mapping is the identity. PFC: ``pause pfc-cos`` in the network-qos
policy with the system-class MTU and the largest per-port headroom as ``pause buffer-size`` (one value per
system class on this platform), and ``priority-flow-control mode on`` on lossless ports. ECN: WRED with
``ecn`` on the lossless queues in one queuing policy per port speed. CNP: ``priority level 1``. Watchdog:
``priority-flow-control watch-dog-interval on`` with interval, shutdown and auto-restore multipliers.
"""

from __future__ import annotations

import math

from tensorfabric import roce
from tensorfabric.fabric.deployed import EcnProfile
from tensorfabric.fabric.plan import SwitchPlan
from tensorfabric.fabric.renderers._escape import cli_name, cli_text, comment
from tensorfabric.fabric.renderers._text import GENERATED, group_interfaces, number, speed_label

__all__ = ["EXTENSION", "TARGET", "render"]

TARGET = "nxos"
EXTENSION = "nxos"
_CLASSIFY = "ROCE_CLASSIFY"
_NETWORK = "ROCE_NETWORK_QOS"


def _class_name(plan: SwitchPlan, priority: int) -> str:
    if priority == plan.roce_priority:
        return "ROCE"
    if priority == plan.cnp_priority:
        return "CNP"
    return f"PRIORITY_{priority}"


def _queuing(plan: SwitchPlan, name: str, ecn: EcnProfile) -> list[str]:
    out = [f"policy-map type queuing {name}"]
    for queue in [*range(1, 8), 0]:
        lines = []
        if queue in plan.strict:
            lines.append("    priority level 1")
        elif queue in plan.ets:
            lines.append(f"    bandwidth remaining percent {plan.ets[queue]}")
        if queue in plan.lossless and ecn.ecn:
            lines.append(f"    random-detect minimum-threshold {ecn.kmin_bytes} bytes maximum-threshold "
                         f"{ecn.kmax_bytes} bytes drop-probability {number(ecn.pmax_percent)} weight 0 ecn")
        if lines:
            label = "q-default" if queue == 0 else f"q{queue}"
            out += [f"  class type queuing c-out-8q-{label}", *lines]
    return out


def render(plan: SwitchPlan) -> str:
    out = [f"! {comment(plan.name, 'switches name')}: Cisco NX-OS, {GENERATED}",
           f"hostname {cli_name(plan.name, 'switches name')}", "!"]
    acl = plan.classifier == "acl"
    if acl:
        out += [f"ip access-list {cli_name(plan.acl_name, 'classifier acl_name')}",
                f"  10 permit udp any any eq {plan.udp_port}", "!"]
    members: dict[int, list[int]] = {}
    if plan.trust == "dscp":
        for dscp, prio in sorted(plan.dscp_to_priority.items()):
            if prio != 0:
                members.setdefault(prio, []).append(dscp)
    else:
        members = {p: [] for p in sorted({plan.roce_priority, plan.cnp_priority, *plan.lossless})}
    for prio in sorted(members):
        out.append(f"class-map type qos match-any {_class_name(plan, prio)}")
        if plan.trust == "dscp":
            out.append(f"  match dscp {','.join(map(str, members[prio]))}")
        else:
            out.append(f"  match cos {prio}")
        if acl and prio == plan.roce_priority:
            out.append(f"  match access-group name {cli_name(plan.acl_name, 'classifier acl_name')}")
    out += ["!", f"policy-map type qos {_CLASSIFY}"]
    for prio in sorted(members):
        out += [f"  class {_class_name(plan, prio)}", f"    set qos-group {prio}"]
    out.append("!")

    lossless_ports = [p for p in plan.ports if p.lossless]
    rooms = [p.headroom for p in lossless_ports if p.headroom is not None]
    out.append(f"policy-map type network-qos {_NETWORK}")
    for prio in plan.lossless:
        out += [f"  class type network-qos c-8q-nq{prio}", f"    mtu {plan.mtu}", f"    pause pfc-cos {prio}"]
        if rooms:
            room = max(rooms, key=lambda r: r.size_bytes)
            pause = room.size_bytes - room.xoff_bytes
            # Resume one frame below the pause point: equal thresholds would toggle PFC on every frame.
            resume = pause - min(pause // 2, plan.mtu)
            out.append(f"    pause buffer-size {room.size_bytes} pause-threshold {pause} resume-threshold {resume}")
    out += ["  class type network-qos c-8q-nq-default", f"    mtu {plan.mtu}", "!"]

    queuing: dict[EcnProfile, str] = {}
    for speed, profile in plan.ecn_profiles().items():
        if profile not in queuing:
            queuing[profile] = f"ROCE_OUT_{speed_label(speed)}"
            out += [*_queuing(plan, queuing[profile], profile), "!"]
    out += ["system qos", f"  service-policy type network-qos {_NETWORK}", "!"]

    wd = plan.watchdog
    if wd.enabled:
        poll = wd.polling_ms or float(roce.PFCWD_POLL_MS)
        out += ["priority-flow-control watch-dog-interval on",
                f"priority-flow-control watch-dog interval {number(poll)}",
                f"priority-flow-control watch-dog shutdown-multiplier "
                f"{max(1, math.ceil((wd.detection_ms or poll) / poll))}",
                f"priority-flow-control auto-restore multiplier "
                f"{max(1, math.ceil((wd.restoration_ms or poll) / poll))}",
                "!"]
    else:
        out += ["priority-flow-control watch-dog-interval off", "!"]
    blocks: list[tuple[str, tuple[str, ...]]] = []
    for port in plan.ports:
        body = [f"  description {cli_text(port.peer, 'link peer')}"] if port.peer else []
        body += [f"  mtu {port.mtu}", f"  priority-flow-control mode {'on' if port.lossless else 'off'}"]
        if port.lossless and wd.enabled:
            body.append("  priority-flow-control watch-dog-interval on")
        body += [f"  service-policy type qos input {_CLASSIFY}",
                 f"  service-policy type queuing output {queuing[port.ecn]}"]
        blocks.append((port.name, tuple(body)))
    for name, body_lines in group_interfaces(blocks):
        out += [f"interface {cli_name(name, f'switches[{plan.name}].ports')}", *body_lines, "!"]
    return "\n".join(out) + "\n"
