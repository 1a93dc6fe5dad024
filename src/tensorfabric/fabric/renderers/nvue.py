"""Cumulus Linux NVUE commands for one switch (paste into a shell or run as a script, then ``nv config apply``).

The RoCE recipe is written out explicitly instead of ``nv set qos roce`` so every value comes from the spec:
the full DSCP table, PFC on the lossless switch-priorities with per-port cable length and headroom (one PFC
profile per distinct cable/headroom), ECN per port speed (one congestion-control profile per speed), the
strict CNP queue, ETS shares and the PFC watchdog. Cumulus' watchdog detects after ``polling-interval x
robustness`` and restores after the same time, so a spec restoration time different from detection cannot
be expressed here.
"""

from __future__ import annotations

import math

from tensorfabric import roce
from tensorfabric.fabric.deployed import EcnProfile, Headroom
from tensorfabric.fabric.plan import SwitchPlan
from tensorfabric.fabric.renderers._escape import comment, shell
from tensorfabric.fabric.renderers._text import GENERATED, number, speed_label

__all__ = ["EXTENSION", "TARGET", "render"]

TARGET = "cumulus"
EXTENSION = "nvue"
_TRUST = {"dscp": "l3", "pcp": "l2"}


def render(plan: SwitchPlan) -> str:
    out = [f"# {comment(plan.name, 'switches name')}: Cumulus NVUE, {GENERATED}",
           f"nv set system hostname {shell(plan.name, 'switches name')}",
           f"nv set qos mapping default-global trust {_TRUST[plan.trust]}"]
    out += [f"nv set qos mapping default-global dscp {d} switch-priority {plan.dscp_to_priority.get(d, 0)}"
            for d in range(64)]
    out += [f"nv set qos egress-queue-mapping default-global switch-priority {p} traffic-class {p}" for p in range(8)]
    prios = ",".join(str(p) for p in plan.lossless)
    out += [f"nv set qos pfc default-global switch-priority {prios}",
            "nv set qos pfc default-global tx enable", "nv set qos pfc default-global rx enable"]

    pfc_profiles: dict[tuple[float | None, Headroom | None], str] = {}
    for port in plan.ports:
        key = (port.cable_length_m, port.headroom)
        if port.lossless and key not in pfc_profiles and key != (None, None):
            # NVUE takes whole metres; rounding up keeps the headroom on the safe side.
            cable = math.ceil(port.cable_length_m) if port.cable_length_m is not None else None
            name = f"roce-{cable}m" if cable is not None else "roce"
            while name in pfc_profiles.values():
                name += "b"
            pfc_profiles[key] = name
            out += [f"nv set qos pfc {name} switch-priority {prios}", f"nv set qos pfc {name} tx enable",
                    f"nv set qos pfc {name} rx enable"]
            if cable is not None:
                out.append(f"nv set qos pfc {name} cable-length {cable}")
            if port.headroom is not None:
                out += [f"nv set qos pfc {name} xoff-threshold {port.headroom.xoff_bytes}",
                        f"nv set qos pfc {name} xon-threshold {port.headroom.xon_bytes}",
                        f"nv set qos pfc {name} port-buffer {port.headroom.size_bytes}"]

    # The first speed's profile is the default; ports of other speeds get a named profile.
    ecn_profiles: dict[EcnProfile, str] = {}
    for speed, profile in plan.ecn_profiles().items():
        if profile in ecn_profiles:
            continue
        name = "default-global" if not ecn_profiles else f"roce-ecn-{speed_label(speed)}"
        ecn_profiles[profile] = name
        for tc in plan.lossless:
            base = f"nv set qos congestion-control {name} traffic-class {tc}"
            out += [f"{base} min-threshold {profile.kmin_bytes}", f"{base} max-threshold {profile.kmax_bytes}",
                    f"{base} probability {number(profile.pmax_percent)}",
                    f"{base} ecn {'enable' if profile.ecn else 'disable'}"]

    for prio in range(8):
        if prio in plan.strict:
            out.append(f"nv set qos egress-scheduler default-global traffic-class {prio} mode strict")
        elif prio in plan.ets:
            out += [f"nv set qos egress-scheduler default-global traffic-class {prio} mode dwrr",
                    f"nv set qos egress-scheduler default-global traffic-class {prio} bw-percent {plan.ets[prio]}"]

    wd = plan.watchdog
    poll = wd.polling_ms or float(roce.PFCWD_POLL_MS)
    if wd.enabled:
        out += [f"nv set qos pfc-watchdog polling-interval {number(poll)}",
                f"nv set qos pfc-watchdog robustness {max(1, math.ceil((wd.detection_ms or poll) / poll))}"]
    for port in plan.ports:
        base = f"nv set interface {shell(port.name, f'switches[{plan.name}].ports')}"
        out += [f"{base} description {shell(port.peer, f'link peer of {plan.name}')}" if port.peer
                else f"# {comment(port.name, 'port')}",
                f"{base} link mtu {port.mtu}", f"{base} link speed {speed_label(port.speed_bps)}"]
        if port.lossless and (port.cable_length_m is not None or port.headroom is not None):
            out.append(f"{base} qos pfc profile {pfc_profiles[(port.cable_length_m, port.headroom)]}")
        if ecn_profiles.get(port.ecn, "default-global") != "default-global":
            out.append(f"{base} qos congestion-control profile {ecn_profiles[port.ecn]}")
        if port.lossless:
            out.append(f"{base} qos pfc-watchdog" + ("" if wd.enabled else " state disable"))
    out.append("nv config apply")
    return "\n".join(out) + "\n"
