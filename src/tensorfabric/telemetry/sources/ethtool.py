"""``ethtool:IF`` / ``ethtool-file:PATH`` -- mlx5 ``ethtool -S`` statistics.

Only an allowlist of RoCE-relevant keys becomes Samples (devices expose hundreds of keys; most are noise for
the detectors). Per-priority keys get ``priority`` and ``direction`` labels instead of names with the priority
inside them. Pause durations are microseconds on the wire and seconds here; PCIe stall percentages become a
0-1 ratio.
"""

from __future__ import annotations

import re
from math import isfinite
from pathlib import Path

from tensorfabric.errors import InputError, ParseError
from tensorfabric.samples import Sample, SampleKind, new_sample
from tensorfabric.telemetry.metrics import METRICS
from tensorfabric.telemetry.sources.base import Reading, SourceContext, capture_or_run

__all__ = ["EthtoolSource", "ethtool_samples", "parse_ethtool_stats"]

_KEY = re.compile(r"[A-Za-z0-9_.\-\[\]]+")
_PRIO = re.compile(r"^(rx|tx)_prio(\d)_(pause|pause_duration|pause_transition|bytes|packets|discards|buf_discard|"
                   r"cong_discard|marked)$")
_GLOBAL = re.compile(r"^(rx|tx)_global_(pause|pause_duration|pause_transition)$")

_PER_PRIO: dict[str, tuple[str, dict[str, str], float]] = {
    "pause": ("roce_pfc_pause_frames_total", {}, 1.0),
    "pause_duration": ("roce_pfc_paused_seconds_total", {}, 1e-6),
    "pause_transition": ("roce_pfc_pause_transitions_total", {}, 1.0),
    "bytes": ("roce_bytes_total", {}, 1.0),
    "packets": ("roce_packets_total", {}, 1.0),
    "discards": ("roce_discards_total", {"reason": "no_buffer"}, 1.0),
    "buf_discard": ("roce_discards_total", {"reason": "host_buffer"}, 1.0),
    "cong_discard": ("roce_discards_total", {"reason": "wred"}, 1.0),
    "marked": ("roce_ecn_marked_packets_total", {}, 1.0),
}

_PLAIN: dict[str, tuple[str, dict[str, str], float]] = {
    "tx_pause_storm_warning_events": ("roce_pause_storm_warning_events_total", {}, 1.0),
    "tx_pause_storm_error_events": ("roce_pause_storm_error_events_total", {}, 1.0),
    "rx_discards_phy": ("roce_discards_total", {"direction": "rx", "reason": "phy_rx"}, 1.0),
    "tx_discards_phy": ("roce_discards_total", {"direction": "tx", "reason": "phy_tx"}, 1.0),
    "rx_buffer_passed_thres_phy": ("roce_buffer_almost_full_events_total", {}, 1.0),
    "rx_crc_errors_phy": ("roce_phy_crc_errors_total", {}, 1.0),
    "rx_symbol_err_phy": ("roce_phy_symbol_errors_total", {}, 1.0),
    "rx_pcs_symbol_err_phy": ("roce_phy_uncorrected_symbols_total", {}, 1.0),
    "rx_corrected_bits_phy": ("roce_phy_corrected_bits_total", {}, 1.0),
    "rx_bits_phy": ("roce_phy_received_bits_total", {}, 1.0),
    "link_down_events_phy": ("roce_link_down_events_total", {}, 1.0),
    "rx_bytes_phy": ("roce_bytes_total", {"direction": "rx"}, 1.0),
    "tx_bytes_phy": ("roce_bytes_total", {"direction": "tx"}, 1.0),
    "rx_packets_phy": ("roce_packets_total", {"direction": "rx"}, 1.0),
    "tx_packets_phy": ("roce_packets_total", {"direction": "tx"}, 1.0),
    # the stall gauges are percent of the last second
    "outbound_pci_stalled_rd": ("roce_pci_stalled_ratio", {"direction": "rd"}, 0.01),
    "outbound_pci_stalled_wr": ("roce_pci_stalled_ratio", {"direction": "wr"}, 0.01),
}


def parse_ethtool_stats(text: str, *, source: str = "<ethtool>") -> tuple[dict[str, float], list[str]]:
    """Parse ``ethtool -S`` text into {key: value}, plus one error per line that is not ``key: number``.

    Raises ParseError when the text holds no statistics line at all.
    """
    values: dict[str, float] = {}
    errors: list[str] = []
    known = _VALID_KEYS
    for number, line in enumerate(text.splitlines(), start=1):
        # partition, not a regex, on the hot path: a poll of 64 NICs parses ~10 000 of these lines; a key
        # seen before skips the name check (the same few hundred keys come back on every poll)
        key, sep, raw = line.partition(":")
        key = key.strip()
        value = None
        if sep and (key in known or _valid_key(key)):
            try:
                value = float(raw.strip())  # what to_number() does, inlined: this loop runs per line
            except ValueError:
                pass
            else:
                if not isfinite(value):
                    value = None
        if value is None:
            if line.strip() and not line.rstrip().endswith("statistics:"):
                errors.append(f"{source}:{number}: not 'name: number': {line.strip()[:60]!r}")
            continue
        values[key] = value
    if not values:
        raise ParseError("no 'name: value' statistics found; expected `ethtool -S` output", source=source,
                         excerpt=text[:80])
    return values, errors


# keys that passed the name check, so the next poll need not run the regex again (bounded against garbage)
_VALID_KEYS: set[str] = set()


def _valid_key(key: str) -> bool:
    if not key or _KEY.fullmatch(key) is None:
        return False
    if len(_VALID_KEYS) > 10_000:
        _VALID_KEYS.clear()
    _VALID_KEYS.add(key)
    return True


def _mapping(key: str) -> tuple[str, dict[str, str], float] | None:
    """(metric, labels beyond host/device/port, scale) for an ethtool key; None for keys outside the allowlist."""
    if (m := _PRIO.match(key)) is not None:
        metric, fixed, scale = _PER_PRIO[m.group(3)]
        return metric, {"direction": m.group(1), "priority": m.group(2), **fixed}, scale
    if (m := _GLOBAL.match(key)) is not None:
        metric, fixed, scale = _PER_PRIO[m.group(2)]
        return metric, {"direction": m.group(1), "priority": "global", **fixed}, scale
    return _PLAIN.get(key)


# key -> mapping, filled on first sight: a NIC exposes the same few hundred keys on every poll
_MAPPINGS: dict[str, tuple[str, dict[str, str], float] | None] = {}

# per-source plan entry for one key: (metric, kind, scale, labels) or None for keys outside the allowlist
_Plan = tuple[str, SampleKind, float, dict[str, str]] | None


def _plan(key: str, host: str, device: str) -> _Plan:
    if key not in _MAPPINGS:
        if len(_MAPPINGS) > 10_000:  # garbage input must not grow the cache without bound
            _MAPPINGS.clear()
        _MAPPINGS[key] = _mapping(key)
    entry = _MAPPINGS[key]
    if entry is None:
        return None
    metric, extra, scale = entry
    return metric, METRICS[metric].kind, scale, {"host": host, "device": device, "port": "1", **extra}


def ethtool_samples(values: dict[str, float], *, time: float, host: str, device: str, source: str,
                    label_cache: dict[str, _Plan] | None = None) -> list[Sample]:
    """The allowlisted keys of ``values`` as canonical Samples (labels host, device, port).

    ``label_cache`` (one per source, for one host and device) keeps each key's mapping and label dict across
    polls: Samples never mutate their labels, and working out ~150 mappings and dicts per NIC per poll was the
    largest cost of a poll.
    """
    plans = {} if label_cache is None else label_cache
    out: list[Sample] = []
    append = out.append
    for key, value in values.items():
        try:
            plan = plans[key]
        except KeyError:
            plan = _plan(key, host, device)
            if len(plans) < 10_000:
                plans[key] = plan
        if plan is not None:
            append(new_sample(time, plan[0], plan[1], value * plan[2], plan[3], source))
    return out


class EthtoolSource:
    def __init__(self, name: str, device: str, ctx: SourceContext, *, path: Path | None = None) -> None:
        self.name = name
        self._device = device
        self._ctx = ctx
        self._path = path
        self._plans: dict[str, _Plan] = {}

    def read(self) -> Reading:
        text = capture_or_run(self.name, self._path, self._ctx, ["ethtool", "-S", self._device])
        now = self._ctx.clock()
        values, errors = parse_ethtool_stats(text, source=self.name)
        samples = ethtool_samples(values, time=now, host=self._ctx.host, device=self._device, source=self.name,
                                  label_cache=self._plans)
        return Reading(tuple(samples), tuple(errors))


def open_live(arg: str, ctx: SourceContext) -> EthtoolSource:
    if not arg:
        raise InputError("ethtool: needs an interface, e.g. ethtool:eth0")
    return EthtoolSource(f"ethtool:{arg}", arg, ctx)


def open_file(arg: str, ctx: SourceContext) -> EthtoolSource:
    """``ethtool-file:PATH`` (device label = file stem) or ``ethtool-file:PATH@IF``."""
    path_text, _, device = arg.partition("@")
    path = Path(path_text)
    if not path_text or not path.is_file():
        raise InputError(f"ethtool-file:{arg}: {path_text!r} is not a file (expected saved `ethtool -S` output)")
    return EthtoolSource(f"ethtool-file:{arg}", device or path.stem, ctx, path=path)
