"""``sonic-redis:HOST:PORT[@NAME]`` -- a SONiC switch's COUNTERS_DB (redis database 2).

Layout as sonic-utilities' pfcstat/queuestat/watermarkstat read it: name maps (``COUNTERS_PORT_NAME_MAP``,
``COUNTERS_QUEUE_NAME_MAP`` with ``Ethernet0:3`` keys, ``COUNTERS_PG_NAME_MAP``) point at ``COUNTERS:<oid>``
hashes; the PFC watchdog writes its per-queue fields into the same queue hashes; watermarks live in
``PERIODIC_WATERMARKS:<oid>``. The switch name comes from CONFIG_DB ``DEVICE_METADATA|localhost`` unless
``@NAME`` gives it.
"""

from __future__ import annotations

import re
from typing import Any

from tensorfabric import roce
from tensorfabric.errors import DiscoveryError, InputError
from tensorfabric.samples import Sample
from tensorfabric.telemetry.metrics import METRICS
from tensorfabric.telemetry.sources.base import Reading, SourceContext, to_number

__all__ = ["QuantaState", "SonicRedisSource", "port_samples", "queue_samples"]

COUNTERS_DB = 2
CONFIG_DB = 4

_PFC = re.compile(r"^SAI_PORT_STAT_PFC_(\d)_(RX|TX)_(PKTS|PAUSE_DURATION_US|PAUSE_DURATION)$")
_ON2OFF = re.compile(r"^SAI_PORT_STAT_PFC_(\d)_ON2OFF_RX_PKTS$")

Entry = tuple[str, dict[str, str], float]

_PORT: dict[str, Entry] = {
    "SAI_PORT_STAT_IF_IN_OCTETS": ("roce_bytes_total", {"direction": "rx"}, 1.0),
    "SAI_PORT_STAT_IF_OUT_OCTETS": ("roce_bytes_total", {"direction": "tx"}, 1.0),
    "SAI_PORT_STAT_IF_IN_UCAST_PKTS": ("roce_packets_total", {"direction": "rx"}, 1.0),
    "SAI_PORT_STAT_IF_OUT_UCAST_PKTS": ("roce_packets_total", {"direction": "tx"}, 1.0),
    "SAI_PORT_STAT_IF_IN_DISCARDS": ("roce_discards_total", {"direction": "rx", "reason": "port"}, 1.0),
    "SAI_PORT_STAT_IF_OUT_DISCARDS": ("roce_discards_total", {"direction": "tx", "reason": "port"}, 1.0),
}
_QUEUE: dict[str, Entry] = {
    "SAI_QUEUE_STAT_PACKETS": ("roce_queue_packets_total", {}, 1.0),
    "SAI_QUEUE_STAT_DROPPED_PACKETS": ("roce_discards_total", {"direction": "tx", "reason": "queue"}, 1.0),
    "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES": ("roce_queue_occupancy_bytes", {}, 1.0),
    "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": ("roce_ecn_marked_packets_total", {}, 1.0),
    "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": ("roce_queue_watermark_bytes", {}, 1.0),
    "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": ("roce_pfcwd_storms_detected_total", {}, 1.0),
    "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED": ("roce_pfcwd_storms_restored_total", {}, 1.0),
    "PFC_WD_QUEUE_STATS_TX_DROPPED_PACKETS": ("roce_discards_total", {"direction": "tx", "reason": "pfcwd"}, 1.0),
    "PFC_WD_QUEUE_STATS_RX_DROPPED_PACKETS": ("roce_discards_total", {"direction": "rx", "reason": "pfcwd"}, 1.0),
}
_PG: dict[str, Entry] = {
    "SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS": ("roce_discards_total", {"direction": "rx", "reason": "pg"},
                                                        1.0),
    "SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES": ("roce_pg_headroom_watermark_bytes", {}, 1.0),
    "SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES": ("roce_pg_shared_watermark_bytes", {}, 1.0),
}
_BOOL = {"true": 1.0, "false": 0.0, "stormed": 1.0, "operational": 0.0}


def _sample(time: float, entry: Entry, value: float, labels: dict[str, str], source: str) -> Sample:
    metric, extra, scale = entry
    return Sample(time, metric, METRICS[metric].kind, value * scale, {**labels, **extra}, source)


QuantaState = dict[tuple[str, str, str], tuple[float, float]]
"""(port, priority, direction) -> (last raw quanta, paused seconds accumulated so far)."""


def _quanta_seconds(state: QuantaState | None, key: tuple[str, str, str], quanta: float, speed_bps: float) -> float:
    """Paused seconds for a quanta counter, each poll's new quanta converted at the speed in force when read.

    A pause quantum is 512 bit times, so its length depends on the link speed. Converting the whole counter
    with today's speed rewrites the past after a speed change (a port that went 100G -> 25G would suddenly
    have been paused 4x longer); converting the increments keeps the history and rates honest. A counter that
    went down was reset: the accumulation restarts from what it reads now.
    """
    if state is None:
        return quanta * float(roce.PAUSE_QUANTUM_BITS) / speed_bps
    before = state.get(key)
    if before is None or quanta < before[0]:
        seconds = quanta * float(roce.PAUSE_QUANTUM_BITS) / speed_bps
    else:
        seconds = before[1] + (quanta - before[0]) * float(roce.PAUSE_QUANTUM_BITS) / speed_bps
    state[key] = (quanta, seconds)
    return seconds


def port_samples(fields: dict[str, str], *, time: float, labels: dict[str, str], source: str,
                 speed_bps: float | None, errors: list[str], quanta: QuantaState | None = None) -> list[Sample]:
    """Samples from one ``COUNTERS:<port oid>`` hash; pause quanta need the port speed (512 bit times each) and
    ``quanta`` (kept by the caller from poll to poll) to convert each poll's increment at its own speed."""
    out: list[Sample] = []
    for name, text in fields.items():
        entry: Entry | None = _PORT.get(name)
        extra: dict[str, str] = {}
        if (m := _PFC.match(name)) is not None:
            prio, direction, what = m.groups()
            extra = {"priority": prio, "direction": direction.lower()}
            if what == "PKTS":
                entry = ("roce_pfc_pause_frames_total", {}, 1.0)
            elif what == "PAUSE_DURATION_US":
                entry = ("roce_pfc_paused_seconds_total", {}, 1e-6)
            elif f"{name}_US" not in fields and speed_bps:
                value = to_number(text)
                if value is None or value < 0:
                    errors.append(f"{source} {labels.get('port')} {name}: not a counter value: {text[:40]!r}")
                    continue
                seconds = _quanta_seconds(quanta, (labels.get("port", ""), prio, direction.lower()), value,
                                          speed_bps)
                out.append(_sample(time, ("roce_pfc_paused_seconds_total", {}, 1.0), seconds,
                                   {**labels, **extra}, source))
                continue
        elif (m := _ON2OFF.match(name)) is not None:
            entry, extra = ("roce_pfc_pause_transitions_total", {}, 1.0), {"priority": m.group(1), "direction": "rx"}
        if entry is None:
            continue
        value = to_number(text)
        if value is None or value < 0:
            errors.append(f"{source} {labels.get('port')} {name}: not a counter value: {text[:40]!r}")
            continue
        out.append(_sample(time, entry, value, {**labels, **extra}, source))
    return out


def queue_samples(fields: dict[str, str], table: dict[str, Entry], *, time: float, labels: dict[str, str],
                  source: str, errors: list[str]) -> list[Sample]:
    """Samples from a queue or priority-group hash (including the watchdog's fields)."""
    out: list[Sample] = []
    for name, text in fields.items():
        if name in ("SAI_QUEUE_ATTR_PAUSE_STATUS", "PFC_WD_STATUS"):
            flag = _BOOL.get(text.strip().lower())
            if flag is None:
                errors.append(f"{source} {labels.get('port')} {name}: unexpected status {text[:40]!r}")
                continue
            metric = "roce_queue_paused" if name == "SAI_QUEUE_ATTR_PAUSE_STATUS" else "roce_pfcwd_stormed"
            out.append(Sample(time, metric, "gauge", flag, dict(labels), source))
            continue
        entry = table.get(name)
        if entry is None:
            continue
        value = to_number(text)
        if value is None or value < 0:
            errors.append(f"{source} {labels.get('port')}:{labels.get('queue', labels.get('priority'))} {name}: "
                          f"not a counter value: {text[:40]!r}")
            continue
        out.append(_sample(time, entry, value, labels, source))
    return out


class SonicRedisSource:
    def __init__(self, host: str, port: int, switch_name: str, ctx: SourceContext, spec: str) -> None:
        import redis  # optional dependency, needed only by this source
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.name = f"sonic-redis:{spec}"
        self._ctx = ctx
        self._switch = switch_name
        # no client-side retries: the next poll is the retry, and a poll must not stall on a dead switch
        options: dict[str, Any] = {"host": host, "port": port, "decode_responses": True, "socket_timeout": 2.0,
                                   "socket_connect_timeout": 2.0, "retry": Retry(NoBackoff(), 0)}
        self._counters: Any = redis.Redis(db=COUNTERS_DB, **options)
        self._config: Any = redis.Redis(db=CONFIG_DB, **options)
        self._redis_error: type[Exception] = redis.RedisError
        self._quanta: QuantaState = {}

    def read(self) -> Reading:
        try:
            return self._read()
        except self._redis_error as exc:
            raise DiscoveryError(f"{self.name}: redis: {exc}") from exc

    def _read(self) -> Reading:
        errors: list[str] = []
        if not self._switch:
            self._switch = self._config.hget("DEVICE_METADATA|localhost", "hostname") or self.name
        ports: dict[str, str] = self._counters.hgetall("COUNTERS_PORT_NAME_MAP")
        queues: dict[str, str] = self._counters.hgetall("COUNTERS_QUEUE_NAME_MAP")
        pgs: dict[str, str] = self._counters.hgetall("COUNTERS_PG_NAME_MAP")
        if not ports:
            errors.append(f"{self.name}: COUNTERS_PORT_NAME_MAP is empty (is this a SONiC COUNTERS_DB?)")
        pipe = self._counters.pipeline(transaction=False)
        for oid in (*ports.values(), *queues.values(), *pgs.values()):
            pipe.hgetall(f"COUNTERS:{oid}")
        for oid in (*queues.values(), *pgs.values()):
            pipe.hgetall(f"PERIODIC_WATERMARKS:{oid}")
        speeds_pipe = self._config.pipeline(transaction=False)
        for name in ports:
            speeds_pipe.hget(f"PORT|{name}", "speed")
        replies: list[dict[str, str]] = pipe.execute()
        speeds: list[str | None] = speeds_pipe.execute()
        now = self._ctx.clock()
        base = {"host": self._switch, "device": self._switch}
        samples: list[Sample] = []
        counters = iter(replies)
        for (name, _), speed in zip(ports.items(), speeds, strict=True):
            mbps = to_number(speed) if speed else None
            samples += port_samples(next(counters), time=now, labels={**base, "port": name}, source=self.name,
                                    speed_bps=mbps * 1e6 if mbps else None, errors=errors, quanta=self._quanta)
        queue_hashes = [next(counters) for _ in queues]
        pg_hashes = [next(counters) for _ in pgs]
        for (key, _), fields, marks in zip(queues.items(), queue_hashes, [next(counters) for _ in queues],
                                           strict=True):
            port, _, index = key.rpartition(":")
            samples += queue_samples({**fields, **marks}, _QUEUE, time=now,
                                     labels={**base, "port": port, "queue": index}, source=self.name, errors=errors)
        for (key, _), fields, marks in zip(pgs.items(), pg_hashes, [next(counters) for _ in pgs], strict=True):
            port, _, index = key.rpartition(":")
            samples += queue_samples({**fields, **marks}, _PG, time=now,
                                     labels={**base, "port": port, "priority": index}, source=self.name,
                                     errors=errors)
        return Reading(tuple(samples), tuple(errors))


def open_source(arg: str, ctx: SourceContext) -> SonicRedisSource:
    address, _, switch = arg.partition("@")
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InputError(f"sonic-redis:{arg}: expected HOST:PORT[@NAME], e.g. sonic-redis:127.0.0.1:6379")
    return SonicRedisSource(host, int(port_text), switch, ctx, arg)
