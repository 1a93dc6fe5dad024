"""What log collectors, terminals and chat tools wrap around each line, and how to take it off.

Each envelope is anchored at the start of the line and built so that no quantified part can overlap what follows it,
so stripping costs linear time on any line. Envelopes that are unambiguous (a Ray actor tag, an mpirun tag, an ISO
timestamp) are stripped wherever they appear; the two that look like ordinary text (pdsh's ``host: `` and
``srun -l``'s ``N: ``) only when most lines of the paste carry them (see :func:`dominant_prefix`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from tensorfabric.jsonload import load_json

__all__ = ["Envelope", "Prefix", "UNAMBIGUOUS", "dominant_prefix", "is_elision", "strip_emphasis", "unwrap"]

Stripped = tuple[str, str] | None
"""What an envelope leaves: ``(rest of the line, origin it named)``, or None when the line does not carry it."""


@dataclass(frozen=True, slots=True)
class Envelope:
    name: str
    strip: Callable[[str], Stripped]


_ANSI = re.compile(r"(?:\x1b|\^\[|\u2190)\[[0-9;?]{0,32}[A-Za-z]|\x1b[()][A-Z0-9]"
                   r"|\x1b\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)")


def _ansi(line: str) -> Stripped:
    if "\x1b" not in line and "^[" not in line and "\u2190[" not in line:
        return None
    rest = _ANSI.sub("", line)
    return (rest, "") if rest != line else None


def _quote(line: str) -> Stripped:
    if not line.startswith(">"):
        return None
    i = 0
    while i < len(line) and line[i] == ">":
        i += 1
        if i < len(line) and line[i] == " ":
            i += 1
    return line[i:], ""


_MESSAGE_KEYS = ("message", "msg", "log", "MESSAGE", "line", "textPayload", "_raw", "body", "Line")
_ORIGIN_KEYS = ("host", "hostname", "_HOSTNAME", "pod", "pod_name", "node", "instance", "kubernetes.pod_name")


def _json_origin(obj: dict[str, object]) -> str:
    for key in _ORIGIN_KEYS:
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
    nested = obj.get("kubernetes")
    if isinstance(nested, dict):
        pod = nested.get("pod_name")
        if isinstance(pod, str):
            return pod
    labels = obj.get("labels") or obj.get("stream")
    if isinstance(labels, dict):
        for key in ("pod", "host", "instance", "node"):
            value = labels.get(key)
            if isinstance(value, str) and value:
                return value
    return ""


def _json(line: str) -> Stripped:
    if not (line.startswith("{") and line.rstrip().endswith("}") and '"' in line):
        return None
    try:
        obj = load_json(line, what="a JSON line", source="")
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    for key in _MESSAGE_KEYS:
        value = obj.get(key)
        if isinstance(value, str):
            return value.rstrip("\n"), _json_origin(obj)
    return None


_ISO = (r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?"
        r"(?: ?(?:Z|UTC|[+-]\d{2}:?\d{2}))?")
# one separator only: what follows may be indented content (an ibv_devinfo line starts with a tab)
_ISO_LEAD = re.compile(_ISO + r"(?:[ \t](?:- )?|$)")
_TIME_LEAD = re.compile(r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:[ \t]|$)")
_BRACKETED = re.compile(r"\[(?:" + _ISO + r"|\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})?|\s*\d+\.\d+)"
                        r"(?: (?:DP\d+ )?(?:PP\d+ )?(TP\d+))?\] ?")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_SYSLOG = re.compile(r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d{1,9})?"
                     r"(?: ([\w.-]{1,253}) ([\w./@-]{1,128})(?:\[\d{1,10}\])?:)?(?: |$)")
_JOURNAL_TAG = re.compile(r"([\w.-]{1,253}) (?:kernel|[\w./@-]{1,128}\[\d{1,10}\]): ")
_GLOG = re.compile(r"[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{1,9} {1,8}\d{1,10} [\w.-]{1,128}:\d{1,7}\] ")


def _timestamp(line: str) -> Stripped:
    first = line[:1]
    if first.isdigit():
        match = _ISO_LEAD.match(line) or _TIME_LEAD.match(line)
        if match is None:
            return None
        rest = line[match.end():]
        tag = _JOURNAL_TAG.match(rest) if match.re is _ISO_LEAD else None
        return (rest[tag.end():], tag[1]) if tag else (rest, "")
    if first == "[":
        match = _BRACKETED.match(line)
        return (line[match.end():], match[1] or "") if match else None
    if line[:3] in _MONTHS:
        match = _SYSLOG.match(line)
        return (line[match.end():], match[1] or "") if match else None
    if first in "IWEF" and (match := _GLOG.match(line)) is not None:
        return line[match.end():], ""
    return None


_ISO_ONLY = re.compile(_ISO)
_LOKI_LABELS = re.compile(r"\{[^{}]{0,4096}\}")
_LABEL_ORIGIN = re.compile(r'(?:pod|host|instance|node)="([^"]{1,253})"')


def _epoch(field: str) -> bool:
    return field.isdigit() and 10 <= len(field) <= 19


def _loki(line: str) -> Stripped:
    """Grafana/Loki table exports: tab-separated, a timestamp (or epoch) column first, maybe a label set."""
    if "\t" not in line:
        return None
    fields = line.split("\t")
    if not (_ISO_ONLY.fullmatch(fields[0]) or _epoch(fields[0])):
        return None
    rest = fields[1:]
    origin = ""
    while len(rest) > 1 and (_LOKI_LABELS.fullmatch(rest[0]) or _ISO_ONLY.fullmatch(rest[0]) or _epoch(rest[0])):
        found = _LABEL_ORIGIN.search(rest[0])
        origin = origin or (found[1] if found else "")
        rest = rest[1:]
    return "\t".join(rest), origin


_RAY = re.compile(r"\((?:[\w.-]{1,128}(?: [\w.-]{1,128})?[ ,] ?)?(?:rank=(\d{1,6})[ ,] ?)?pid=(\d{1,10})"
                  r"(?:,? ip=([0-9A-Fa-f.:]{1,45}))?(?:,? node=[\w.-]{1,128})?\)(?: |$)")


_RAY_REPEATED = re.compile(r" ?\[repeated \d{1,9}x across cluster\]$")


def _ray(line: str) -> Stripped:
    if not line.startswith("("):
        return None
    match = _RAY.match(line)
    if match is None:
        return None
    origin = match[3] or (f"rank{match[1]}" if match[1] else f"pid {match[2]}")
    rest = line[match.end():]
    # Ray's log deduplication appends a count to a line it folded: the line itself is the same
    if rest.endswith("across cluster]"):
        rest = _RAY_REPEATED.sub("", rest)
    return rest, origin


# Open MPI's --tag-output; PRRTE (Open MPI 5) puts the session before the job and a space after the colon
_MPIRUN = re.compile(r"\[([\w.-]{1,128}@)?\d{1,6},(\d{1,6})\]<(?:stdout|stderr)>:")
_TORCHRUN = re.compile(r"\[(?:rank|default)(\d{1,6})\]:")
_KUBECTL = re.compile(r"\[pod/([\w.-]{1,253})/[\w.-]{1,253}\] ")


def _bracket_tag(line: str) -> Stripped:
    if not line.startswith("["):
        return None
    if (m := _MPIRUN.match(line)) is not None:
        end = m.end() + (1 if m[1] and line[m.end():m.end() + 1] == " " else 0)
        return line[end:], f"rank{m[2]}"
    if (m := _TORCHRUN.match(line)) is not None:
        return line[m.end():], f"rank{m[1]}"
    if (m := _KUBECTL.match(line)) is not None:
        return line[m.end():], m[1]
    return None


UNAMBIGUOUS: tuple[Envelope, ...] = (
    Envelope("ANSI colours", _ansi),
    Envelope("Markdown quotes", _quote),
    Envelope("JSON lines", _json),
    Envelope("Loki/Grafana table", _loki),
    Envelope("timestamps", _timestamp),
    Envelope("Ray prefix", _ray),
    Envelope("collector tags", _bracket_tag),
)
_MAX_LAYERS = 8


def unwrap(line: str, counts: dict[str, int]) -> tuple[str, str]:
    """The line without its unambiguous envelopes (any order, up to eight layers) and the first origin named."""
    origin = ""
    for _ in range(_MAX_LAYERS):
        for envelope in UNAMBIGUOUS:
            stripped = envelope.strip(line)
            if stripped is not None:
                line, named = stripped
                origin = named or origin  # the innermost envelope names the most specific origin
                counts[envelope.name] = counts.get(envelope.name, 0) + 1
                break
        else:
            return line, origin
    return line, origin


@dataclass(frozen=True, slots=True)
class Prefix:
    """A prefix that is ordinary text unless most of the paste carries it."""

    name: str
    pattern: re.Pattern[str]
    origin: Callable[[re.Match[str]], str]
    name_ok: Callable[[str], bool]
    """Whether the captured name can be this envelope's (a pdsh host carries a digit; "Update: " is prose)."""

    def strip(self, line: str) -> re.Match[str] | None:
        match = self.pattern.match(line)
        return match if match is not None and self.name_ok(match[1]) else None


def _hostlike(name: str) -> bool:
    # YAML and ibv_devinfo keys look like "name: value" too; the host names of a fleet carry a digit
    return any(c.isdigit() for c in name)


PREFIXES: tuple[Prefix, ...] = (
    Prefix("rank tags", re.compile(r"\[(\d{1,6})\] "), lambda m: f"rank{m[1]}", lambda name: True),
    Prefix("pdsh prefix", re.compile(r"([A-Za-z][\w.-]{0,252}): "), lambda m: m[1], _hostlike),
    Prefix("srun -l prefix", re.compile(r" {0,6}(\d{1,6}): "), lambda m: f"task {m[1]}", lambda name: True),
)
DOMINANT_SHARE = 0.6
"""Share of a paste's non-blank lines that must carry an ambiguous prefix for it to be taken as an envelope."""


def dominant_prefix(lines: Iterable[str], exclude: Collection[str] = ()) -> Prefix | None:
    """The ambiguous prefix carried by most non-blank lines (at least two, naming at most 64 origins), if any."""
    total = 0
    candidates = [p for p in PREFIXES if p.name not in exclude]
    seen: dict[str, list[str]] = {p.name: [] for p in candidates}
    for line in lines:
        if not line.strip():
            continue
        total += 1
        for prefix in candidates:
            match = prefix.strip(line)
            if match is not None:
                seen[prefix.name].append(match[1])
    for prefix in candidates:
        names = seen[prefix.name]
        if len(names) >= 2 and len(names) >= DOMINANT_SHARE * total and len(set(names)) <= 64:
            return prefix
    return None


_ELISION = re.compile(r"\s{0,40}(?:\.{3,}|\u2026|\[\s?(?:\.{3}|\u2026)\s?\]|\(\s?(?:\.{3}|\u2026)\s?\)|<snip(?:ped)?>"
                      r"|\[snip(?:ped)?\]|[\[(]?(?:output )?truncated[\])]?"
                      r"|(?:\.{3}|\u2026) ?\(?\d{1,9} (?:more )?lines?"
                      r"(?: omitted| skipped| truncated)?\)? ?(?:\.{3}|\u2026)?)\s{0,40}", re.IGNORECASE)


def is_elision(line: str) -> bool:
    return len(line) < 200 and _ELISION.fullmatch(line) is not None


_EMPHASIS = ("**", "__", "`", "*", "_")


def strip_emphasis(line: str) -> str | None:
    """A whole line wrapped in Markdown bold, italic or code marks, unwrapped; None when it is not."""
    text = line.strip()
    for mark in _EMPHASIS:
        if len(text) > 2 * len(mark) and text.startswith(mark) and text.endswith(mark):
            inner = text[len(mark):-len(mark)]
            if inner.strip() == inner and mark not in inner[:1] + inner[-1:]:
                return inner
    return None
