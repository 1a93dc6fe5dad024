"""Snapshot verdicts on the fabric side: a lossless queue that drops, two counter paths that disagree, a PFC
watchdog flapping between stormed and operational, and PFC operationally off on a port whose pause counters move.

Each verdict is graded by the strength of its evidence rather than withheld:

* ``moving`` -- two dumps were given and the counter rose between them: it is happening now;
* ``counted`` -- one dump: the counter is non-zero since it was last cleared, which may be old news;
* ``stopped`` -- two dumps, and the counter did not move between them: it happened, it is not happening now.

The grade sets the severity (``moving`` is an error where the verdict means loss or a broken lossless class) and
the message says which it is, so a single ticket paste still gets an answer and a second paste sharpens it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from tensorfabric.findings import Finding
from tensorfabric.samples import Sample
from tensorfabric.telemetry.window import subject_of

__all__ = ["Dumps", "Grade", "lossless_drops", "path_disagreement", "pfc_off_pausing", "watchdog_flapping"]

Grade = Literal["moving", "counted", "stopped"]
Series = tuple[str, tuple[tuple[str, str], ...]]
_SINCE = "counted since the counters were last cleared"
_WHEN = {"moving": "and it rose between the two dumps: it is happening now",
         "counted": f"{_SINCE} (one dump: give a second one a minute later to see whether it still moves)",
         "stopped": "but it did not move between the two dumps: it happened earlier and is not happening now"}


@dataclass(frozen=True, slots=True)
class Dumps:
    """The newest dump (every sample of it, per series and source) and, when given, an earlier one of the same
    sources (the newest value per series)."""

    now: Mapping[Series, tuple[Sample, ...]]
    before: Mapping[Series, float] | None

    @classmethod
    def of(cls, samples: Iterable[Sample], earlier: Iterable[Sample] | None = None) -> Dumps:
        now: dict[Series, dict[str, Sample]] = defaultdict(dict)
        for s in samples:
            held = now[s.series].get(s.source)
            if held is None or held.time <= s.time:
                now[s.series][s.source] = s
        before: dict[Series, tuple[float, float]] | None = None
        if earlier is not None:
            before = {}
            for s in earlier:
                if s.series not in before or before[s.series][0] <= s.time:
                    before[s.series] = (s.time, s.value)
        return cls({k: tuple(v.values()) for k, v in now.items()},
                   None if before is None else {k: v for k, (_, v) in before.items()})

    def latest(self, metric: str) -> Iterable[Sample]:
        """The newest sample of every series of ``metric`` (one per series: the first source's)."""
        for (name, _), found in self.now.items():
            if name == metric:
                yield found[0]

    def delta(self, sample: Sample) -> float | None:
        """How much a counter rose since the earlier dump (None without one, or when the counter was reset)."""
        if self.before is None or sample.series not in self.before:
            return None
        rise = sample.value - self.before[sample.series]
        return rise if rise >= 0 else None

    def grade(self, samples: Iterable[Sample]) -> Grade:
        """The evidence grade of non-zero counters: moving if any rose between two dumps."""
        if self.before is None:
            return "counted"
        deltas = [self.delta(s) for s in samples]
        return "moving" if any(d is not None and d > 0 for d in deltas) else "stopped"


def _severity(grade: Grade, *, moving: Literal["error", "warning"] = "error") -> Literal["error", "warning", "info"]:
    return moving if grade == "moving" else "warning" if grade == "counted" else "info"


# --- lossless (no-drop) queues that drop --------------------------------------------------------------------------

_MIXED = ("port", "eth_no_buffer", "eth_wred")
"""Discard reasons that mix every class (port totals) or count Ethernet, not RoCE, receive drops."""
_QUEUE_INDEX = re.compile(r"(?:uc|voq|q|tc)?(\d{1,2})", re.IGNORECASE)


def _lossless(labels: Mapping[str, str], priorities: tuple[str, ...], names: tuple[str, ...]) -> bool:
    if labels.get("reason") in _MIXED:
        return False
    queue = labels.get("queue", "")
    if queue:
        index = _QUEUE_INDEX.fullmatch(queue)
        return (index is not None and index.group(1) in priorities) or queue.lower() in names
    return labels.get("priority", "") in priorities


def lossless_drops(dumps: Dumps, priorities: tuple[str, ...], names: tuple[str, ...],
                   skip: set[tuple[str, str]]) -> list[Finding]:
    """Drops counted on a lossless priority or no-drop queue (PFC should have paused instead)."""
    by_port: dict[str, list[Sample]] = defaultdict(list)
    for s in dumps.latest("roce_discards_total"):
        if s.value > 0 and _lossless(s.labels, priorities, names) and \
                (s.labels.get("host", ""), s.labels.get("device", "")) not in skip:
            by_port[subject_of(s.labels)].append(s)
    out = []
    for subject, rows in sorted(by_port.items()):
        grade = dumps.grade(rows)
        where = ", ".join(f"{_where(s)} {s.value:.0f}" for s in rows)
        watchdog = any(s.labels.get("reason") == "pfcwd" for s in rows)
        evidence: dict[str, object] = {
            "grade": grade, "drops": {_where(s): s.value for s in rows},
            **({"rose_by": {_where(s): dumps.delta(s) for s in rows}} if dumps.before is not None else {})}
        cause = ("the PFC watchdog dropped a stormed lossless queue" if watchdog else
                 "a lossless class dropped packets PFC should have held back")
        out.append(Finding("telemetry.lossless-queue-drops", _severity(grade), subject,
                           f"{cause} ({where}), {_WHEN[grade]}", evidence,
                           "Find the storm behind the watchdog's drops (the port's peer keeps sending pause: "
                           "tensorfabric monitor, storm-origin) and fix or isolate it." if watchdog else
                           "Check PFC is enabled on this priority at both ends of the link (show pfc priority / "
                           "mlnx_qos), that the headroom covers the cable length and MTU (tensorfabric fabric "
                           "headroom), and that the queue is mapped to the lossless priority group."))
    return out


def _where(s: Sample) -> str:
    """``queue 3 tx``, ``prio 3 rx (pg)``: where a drop counter counts (a queue's own drops need no reason)."""
    queue, priority, reason = s.labels.get("queue"), s.labels.get("priority"), s.labels.get("reason", "")
    place = f"queue {queue}" if queue else f"prio {priority}" if priority else "port"
    direction = s.labels.get("direction", "")
    place = f"{place} {direction}" if direction else place
    return f"{place} ({reason})" if reason and reason != "queue" else place


# --- two counter paths that disagree ------------------------------------------------------------------------------

_SDK_PORT = re.compile(r"0x[0-9a-fA-F]{1,8}")
"""A port named by the switch SDK's logical id: the counter was read from the ASIC SDK, not through SONiC."""


def path_disagreement(dumps: Dumps) -> list[Finding]:
    """PFC frames counted on one path and 0 on another: the same series from two sources, or a switch whose SDK dump
    (ports by logical id) counts frames on a priority every SONiC-named port shows as 0 (sonic-buildimage#5540)."""
    out: list[Finding] = []
    for (metric, _), found in sorted(dumps.now.items()):
        if metric != "roce_pfc_pause_frames_total" or len(found) < 2:
            continue
        counted = [s for s in found if s.value > 0]
        if counted and len(counted) < len(found):
            zero = [s.source for s in found if s.value == 0]
            out.append(_disagree(subject_of(found[0].labels, "priority"), dumps, counted,
                                 {s.source: s.value for s in found}, f"0 in {', '.join(zero)}"))
    frames = list(dumps.latest("roce_pfc_pause_frames_total"))
    by_switch: dict[tuple[str, str, str], tuple[list[Sample], list[Sample]]] = defaultdict(lambda: ([], []))
    for s in frames:
        if s.labels.get("host") != s.labels.get("device") or not s.labels.get("priority", "").isdigit():
            continue  # switch output only: host = device = the switch
        key = (s.labels["host"], s.labels["priority"], s.labels.get("direction", ""))
        by_switch[key][0 if _SDK_PORT.fullmatch(s.labels.get("port", "")) else 1].append(s)
    for (switch, priority, direction), (sdk, named) in sorted(by_switch.items()):
        counted = [s for s in sdk if s.value > 0]
        if counted and named and all(s.value == 0 for s in named):
            out.append(_disagree(f"{switch} prio {priority} {direction}".strip(), dumps, counted,
                                 {f"SDK port {s.labels['port']}": s.value for s in counted},
                                 f"0 on all {len(named)} ports the switch's own counters show"))
    return out


def _disagree(subject: str, dumps: Dumps, counted: list[Sample], values: dict[str, float], other: str) -> Finding:
    grade = dumps.grade(counted)
    total = sum(s.value for s in counted)
    return Finding(
        "telemetry.counter-path-disagreement", "warning" if grade != "stopped" else "info", subject,
        f"PFC frames counted on one path ({total:.0f}) but {other}: the two read the same frames from different "
        f"places, {_WHEN[grade]}", {"grade": grade, "values": values},
        "Trust the ASIC (SDK) count for what crossed the wire; the 0 comes from the path SONiC reads (SAI port "
        "stats, COUNTERS_DB) or from a `sonic-clear pfccounters` baseline -- compare two dumps, and report the "
        "platform's SAI if the SONiC side never moves (sonic-buildimage#5540).")


# --- PFC watchdog flapping ----------------------------------------------------------------------------------------

def watchdog_flapping(dumps: Dumps, flap_cycles: float) -> list[Finding]:
    """A queue the watchdog keeps storming and restoring: many cycles since cleared, or cycles between two dumps."""
    restored = {subject_of(s.labels, "queue"): s for s in dumps.latest("roce_pfcwd_storms_restored_total")}
    detected = {subject_of(s.labels, "queue"): s for s in dumps.latest("roce_pfcwd_storms_detected_total")}
    out = []
    for subject, back in sorted(restored.items()):
        storms = detected.get(subject)
        if storms is None or back.value <= 0:
            continue
        rose_back, rose_storms = dumps.delta(back), dumps.delta(storms)
        moving = rose_back is not None and rose_storms is not None and rose_back >= 2 and rose_storms >= 2
        many = min(back.value, storms.value) >= flap_cycles
        if not moving and not many:
            continue
        grade: Grade = "moving" if moving else "counted" if dumps.before is None else "stopped"
        evidence: dict[str, object] = {"grade": grade, "storms_detected": storms.value, "restored": back.value}
        if dumps.before is not None:
            evidence.update(detected_rose_by=rose_storms, restored_rose_by=rose_back)
        out.append(Finding(
            "telemetry.pfcwd-flapping", "warning" if grade != "stopped" else "info", subject,
            f"the PFC watchdog keeps cycling between stormed and operational ({storms.value:.0f} storms detected, "
            f"{back.value:.0f} restored), {_WHEN[grade]}: the restoration sees the storm gone while it is not",
            evidence,
            "A storm on every PFC priority of a port can stop the ASIC counting PFC frames once the watchdog disables "
            "PFC, so restoration fires while the storm goes on (sonic-buildimage#29203): find and fix the storming "
            "peer, and raise restoration_time (config pfcwd start --restoration-time) meanwhile."))
    return out


# --- PFC operationally off while pause counters move ---------------------------------------------------------------

def pfc_off_pausing(dumps: Dumps) -> list[Finding]:
    """A port whose PFC is operationally off (a DCBX mismatch: admin on, oper off) while pause frames are counted."""
    pause: dict[tuple[str, str, str], list[Sample]] = defaultdict(list)
    for metric in ("roce_pause_ctrl_frames_total", "roce_pfc_pause_frames_total"):
        for s in dumps.latest(metric):
            if s.value > 0:
                pause[(s.labels.get("host", ""), s.labels.get("device", ""), s.labels.get("port", ""))].append(s)
    out = []
    for s in sorted(dumps.latest("roce_pfc_operational"), key=lambda x: sorted(x.labels.items())):
        key = (s.labels.get("host", ""), s.labels.get("device", ""), s.labels.get("port", ""))
        if s.value != 0 or not pause.get(key):
            continue
        rows = pause[key]
        grade = dumps.grade(rows)
        counts = {f"{r.labels.get('direction', '')} {'PFC' if r.metric.startswith('roce_pfc') else 'pause'}"
                  f"{' prio ' + r.labels['priority'] if r.labels.get('priority') else ''}".strip(): r.value
                  for r in rows}
        out.append(Finding(
            "telemetry.pfc-oper-off-pausing", _severity(grade), subject_of(s.labels, "priority"),
            "PFC is operationally off on this port (configured, but not agreed with the peer: a DCBX mismatch) "
            f"while pause frames are counted ({', '.join(f'{k} {v:.0f}' for k, v in counts.items())}), "
            f"{_WHEN[grade]}: the lossless class is not protected here",
            {"grade": grade, "pfc_operational": 0, "pause_frames": counts},
            "Make both ends agree: show lldp dcbx interface shows the peer's PFC TLV; set the same no-drop "
            "priorities on both, and either turn DCBX willing mode on at the host (lldptool / mlnx_qos) or set "
            "priority-flow-control mode on (not auto) on the switch port."))
    return out
