"""``sysfs:ROOT`` -- RDMA port counters from ``<SYS>/class/infiniband/<dev>/ports/<n>/{counters,hw_counters}``.

ROOT is read by :func:`tensorfabric.fsutil.locate_sysfs`, as the doctor reads ``--sysfs-root``: ``/`` (a tree
holding ``sys/``) and ``/sys`` (the sysfs directory) both work; the log line says which was used.

Pitfalls handled (reference telemetry.md section 5): data counters are 4-byte words; ``N/A (no PMA)`` means the
counter is absent, never zero; a device without ``counters/`` (bnxt_re) is fine; a file that vanishes between
listing and reading is reported as an error and the rest of the poll is kept.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from tensorfabric.errors import InputError
from tensorfabric.fsutil import SysfsRoot, locate_sysfs
from tensorfabric.samples import Sample
from tensorfabric.telemetry.sources.base import Reading, SourceContext, to_number
from tensorfabric.telemetry.sources.generic import GenericBudget
from tensorfabric.telemetry.sources.hwcounters import HW_COUNTERS, PMA_COUNTERS, samples_for

__all__ = ["SysfsSource", "open_source", "parse_rate_file"]

log = logging.getLogger(__name__)

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


def parse_rate_file(text: str) -> float | None:
    """``400 Gb/sec (4X NDR)`` -> 4e11 bits/s; None when the text is not in that form."""
    match = _RATE.match(text)
    return float(match.group(1)) * 1e9 if match else None


class SysfsSource:
    def __init__(self, where: SysfsRoot, ctx: SourceContext) -> None:
        self.name = f"sysfs:{where.given}"
        self._ctx = ctx
        self.where = where
        self._ib = where.sys / "class" / "infiniband"
        log.info("%s: %s; reading %s", self.name, where.note, self._ib)
        self._budget = GenericBudget(ctx.counters, self.name)

    def read(self) -> Reading:
        now = self._ctx.clock()
        samples: list[Sample] = []
        errors: list[str] = []
        try:
            devices = sorted(self._ib.iterdir())
        except OSError as exc:
            return Reading((), (f"{self._ib}: {exc.strerror or exc} ({self.where.note}; no RDMA devices?)",))
        for dev in devices:
            for port_dir in sorted((dev / "ports").glob("*")):
                labels = {"host": self._ctx.host, "device": dev.name, "port": port_dir.name}
                for sub, table in (("counters", PMA_COUNTERS), ("hw_counters", HW_COUNTERS)):
                    values = self._read_dir(port_dir / sub, errors)
                    samples += samples_for(values, table, time=now, labels=labels, source=self.name,
                                           budget=self._budget)
                layer = self._read_text(port_dir / "link_layer", errors, optional=True)
                if layer is not None and layer.strip():
                    samples.append(Sample(now, "roce_port_info", "gauge", 1.0,
                                          {**labels, "link_layer": layer.strip()[:32]}, self.name))
                speed = self._read_text(port_dir / "rate", errors, optional=True)
                bps = parse_rate_file(speed) if speed is not None else None
                if bps is not None:
                    samples.append(Sample(now, "roce_link_speed_bytes_per_second", "gauge", bps / 8, labels, self.name))
        self._budget.report(errors)
        return Reading(tuple(samples), tuple(errors))

    def _read_dir(self, directory: Path, errors: list[str]) -> dict[str, float]:
        try:
            files = sorted(p for p in directory.iterdir() if not p.is_dir())
        except OSError:
            return {}  # no counters/ directory: the device does not have them (bnxt_re), not an error
        values: dict[str, float] = {}
        for path in files:
            text = self._read_text(path, errors)
            if text is None or text.strip().startswith("N/A"):
                continue
            value = to_number(text)
            if value is None or value < 0:
                errors.append(f"{path}: not a counter value: {text.strip()[:40]!r}")
                continue
            values[path.name] = value
        return values

    @staticmethod
    def _read_text(path: Path, errors: list[str], *, optional: bool = False) -> str | None:
        try:
            return path.read_text(errors="replace")
        except FileNotFoundError:
            if not optional:
                errors.append(f"{path}: vanished during the poll")
            return None
        except OSError as exc:
            errors.append(f"{path}: {exc.strerror or exc}")
            return None


def open_source(arg: str, ctx: SourceContext) -> SysfsSource:
    if not arg:
        raise InputError("sysfs: needs a root directory, e.g. sysfs:/sys or sysfs:/")
    return SysfsSource(locate_sysfs(arg), ctx)
