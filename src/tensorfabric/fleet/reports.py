"""Read ``doctor --json`` reports however they were collected: one file per host (a DaemonSet writing to a shared
volume, Ansible's fetch), JSON lines (``jq -c``), or one paste holding many hosts (``pdsh -w node[1-8] tensorfabric
doctor --json``, ``kubectl logs --prefix``, ``srun -l``), where each line carries its host and the lines of
different hosts interleave.

A plain JSON file is parsed directly; anything else goes through the one intake (:mod:`tensorfabric.intake`),
which takes the collector prefixes off and names each line's origin; the JSON documents are then read per origin.
Tolerate, then report: a file that holds no report is listed with the reason and skipped, never fatal; a value of
the wrong shape inside a report is a warning naming it. Only a set of inputs holding no report at all is an error.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tensorfabric.errors import InputError, ParseError
from tensorfabric.fleet.facts import HostReport, host_facts
from tensorfabric.fsutil import read_input
from tensorfabric.intake import Line, ReadReport, Tally, normalise
from tensorfabric.jsonload import JsonTooDeep, load_json

__all__ = ["FORMAT", "ReportSet", "is_doctor_report", "read_report_text", "read_reports"]

FORMAT = "doctor --json report"
_JSON_LINE = re.compile(r'^\s*(?:[{}\[\]"]|-?\d|true\b|false\b|null\b)')


@dataclass(frozen=True, slots=True)
class ReportSet:
    """The hosts read, what was read from each input, and the inputs that held no report."""

    hosts: tuple[HostReport, ...]
    reads: tuple[ReadReport, ...]
    skipped: tuple[tuple[str, str], ...]
    """``(path, why)`` for every input that held no report."""
    warnings: tuple[str, ...] = ()

    def summary(self) -> str:
        inputs = len(self.reads) + len(self.skipped)
        parts = [f"{len(self.hosts)} host report{'s' if len(self.hosts) != 1 else ''} from {inputs} "
                 f"input{'s' if inputs != 1 else ''}"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped ({', '.join(p for p, _ in self.skipped[:5])}"
                         f"{', ...' if len(self.skipped) > 5 else ''})")
        warned = sum(1 for h in self.hosts if h.warnings) + len(self.warnings)
        if warned:
            parts.append(f"{warned} with warnings")
        return "read " + ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        # Inputs read cleanly are counted, not listed: 10,000 identical lines say nothing.
        noted = [r.to_dict() for r in self.reads if r.warnings or r.not_understood or r.envelopes or r.skipped]
        return {"summary": self.summary(), "inputs_read": len(self.reads), "inputs": noted,
                "skipped": [{"source": p, "reason": why} for p, why in self.skipped], "warnings": list(self.warnings)}


def is_doctor_report(obj: Any) -> bool:
    return isinstance(obj, dict) and ("schema_version" in obj or ("findings" in obj and "host" in obj))


def _plain(data: bytes, source: str, name: str) -> tuple[list[HostReport], ReadReport] | None:
    """The fast path: the whole input is one JSON report, or JSON lines of reports (no envelope to take off)."""
    head = data.lstrip()[:1]
    if head != b"{":
        return None
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    try:
        docs = [load_json(data, what=FORMAT, source=source)]
    except ValueError:
        try:
            docs = [load_json(line, what=FORMAT, source=source) for line in data.splitlines() if line.strip()]
        except ValueError:
            return None
    if not docs or not all(is_doctor_report(d) for d in docs):
        return None
    hosts = [host_facts(d, source=source, name=name if len(docs) == 1 else f"{name}#{i + 1}")
             for i, d in enumerate(docs)]
    version = ",".join(sorted({str(h.schema_version) for h in hosts}))
    warnings = tuple(f"{h.host}: {w}" for h in hosts for w in h.warnings)
    return hosts, ReadReport(source, FORMAT, f"v{version}", lines, lines, (), 0, (), len(docs), warnings)


def _raise_if_too_deep(raw: bytes, source: str) -> None:
    if raw.lstrip()[:1] in (b"{", b"["):
        try:
            load_json(raw, what=FORMAT, source=source)
        except JsonTooDeep:
            raise
        except ValueError:
            pass


def _decode(text: str) -> Any:
    body = text.strip()
    try:
        return load_json(body, what=FORMAT, source="")
    except ValueError:
        return None


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _json_like(text: str) -> bool:
    return bool(_JSON_LINE.match(text))


def _documents(lines: Sequence[Line], tally: Tally) -> Iterator[tuple[Any, Line]]:
    """JSON documents among ``lines`` (one origin's), each with its first line.

    A document is one line (``jq -c``) or a pretty-printed block from a line holding ``{`` to the next line holding
    ``}`` at the same indentation or less; inside a block only JSON-looking lines are kept (every line of a printed
    report starts with a brace, a bracket, a quote or a bare value), so prose or headings pasted between its lines
    are passed over. A block that does not decode is skipped whole, so every line is decoded at most twice and no
    input makes this quadratic."""
    content = [line for line in lines if line.kind == "text"]
    i = 0
    while i < len(content):
        text = content[i].text
        stripped = text.strip()
        if not stripped.startswith("{"):
            i += 1
            continue
        if stripped.endswith("}"):
            doc = _decode(stripped)
            if doc is not None:
                if is_doctor_report(doc):
                    tally.use(content[i])
                    yield doc, content[i]
                i += 1
                continue
        base = _indent(text)
        end = i + 1
        while end < len(content):
            other = content[end].text
            if other.strip() in ("}", "{") and _indent(other) <= base:
                break
            end += 1
        if end < len(content) and content[end].text.strip() == "}":
            block = [line for line in content[i:end + 1] if _json_like(line.text)]
            doc = _decode("\n".join(line.text for line in block))
            if doc is not None:
                if is_doctor_report(doc):
                    for line in block:
                        tally.use(line)
                    yield doc, content[i]
                i = end + 1
                continue
        tally.not_understood(content[i])
        i = max(end, i + 1)


def read_report_text(data: str | bytes, *, source: str = "<reports>",
                     name: str | None = None) -> tuple[list[HostReport], ReadReport]:
    """Every report in one input. ``name`` names a report whose host the report itself and the collector do not
    (default: the file name without its extension). ParseError for not-text, empty input or no report."""
    base = name or os.path.splitext(os.path.basename(source))[0] or source
    raw = data.encode() if isinstance(data, str) else data
    plain = _plain(raw, source, base)
    if plain is not None:
        return plain
    text = normalise(raw, source=source, what="doctor --json reports")
    tally = Tally(text, FORMAT)
    hosts: list[HostReport] = []
    for origin, lines in text.by_origin().items():
        docs = list(_documents(lines, tally))
        for k, (doc, first) in enumerate(docs):
            label = origin or base
            host = host_facts(doc, source=source, name=label if len(docs) == 1 else f"{label}#{k + 1}")
            hosts.append(host)
            for warning in host.warnings:
                tally.warn(first, f"{host.host}: {warning}")
    try:
        tally.require("`tensorfabric doctor --json` output: a JSON object with schema_version, findings and host")
    except ParseError:
        _raise_if_too_deep(raw, source)  # the more telling reason, when the text is one JSON document too deep
        raise
    versions = sorted({str(h.schema_version) for h in hosts})
    tally.version = "v" + ",".join(versions)
    tally.sections = len(hosts)
    return hosts, tally.report()


def _inputs(paths: Iterable[str]) -> Iterator[str]:
    for path in paths:
        if path != "-" and os.path.isdir(path):
            found = False
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for file in sorted(files):
                    if not file.startswith("."):
                        found = True
                        yield os.path.join(root, file)
            if not found:
                raise InputError(f"report directory {path!r} holds no files; point it at the directory the "
                                 "doctor reports were written to")
        else:
            yield path


def _unique(hosts: list[HostReport]) -> tuple[list[HostReport], list[str]]:
    """Two reports naming one host (the same node collected twice, pods sharing a name) are both kept, each named
    with its source, and said so."""
    seen: dict[str, int] = {}
    for host in hosts:
        seen[host.host] = seen.get(host.host, 0) + 1
    out, warnings = [], []
    for name in sorted(n for n, c in seen.items() if c > 1):
        sources = [h.source for h in hosts if h.host == name]
        warnings.append(f"{len(sources)} reports name host {name!r} ({', '.join(sources[:4])}); each is kept and "
                        "named with its source")
    taken: dict[str, int] = {}
    for host in hosts:
        if seen[host.host] == 1:
            out.append(host)
            continue
        name = f"{host.host} ({host.source})"
        taken[name] = taken.get(name, 0) + 1
        out.append(replace(host, host=name if taken[name] == 1 else f"{name} #{taken[name]}"))
    return out, warnings


def read_reports(paths: Sequence[str], *, stdin: Any = None) -> ReportSet:
    """Every report in the files and directories ``paths`` (``-`` reads ``stdin``). InputError when none holds one."""
    if not paths:
        raise InputError("fleet check: give the doctor reports to compare: files, directories, or - for stdin")
    with _no_cyclic_gc():
        hosts, reads, skipped = _read_all(paths, stdin)
    if not hosts:
        first = f"; {skipped[0][0]}: {skipped[0][1]}" if skipped else ""
        raise InputError(f"fleet check: no doctor report among {len(skipped)} input(s){first}")
    named, warnings = _unique(hosts)
    return ReportSet(tuple(named), tuple(reads), tuple(skipped), tuple(warnings))


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The cyclic collector off while reports are read: they hold no cycles, and with 10,000 of them alive its
    full passes over a growing heap cost more than the reading (measured: 8.3 s -> 5.9 s)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _read_all(paths: Sequence[str], stdin: Any) -> tuple[list[HostReport], list[ReadReport], list[tuple[str, str]]]:
    hosts: list[HostReport] = []
    reads: list[ReadReport] = []
    skipped: list[tuple[str, str]] = []
    for path in _inputs(paths):
        try:
            data = read_input(path, "doctor report", stdin=stdin)
            found, read = read_report_text(data, source=path)
        except (InputError, ParseError) as exc:
            skipped.append((path, _without_path(str(exc), path)))
            continue
        hosts += found
        reads.append(read)
    return hosts, reads, skipped


def _without_path(message: str, path: str) -> str:
    """``message`` without the leading ``path:`` the skip list already shows; ``path:65: ...`` keeps "line 65"."""
    rest = message.removeprefix(f"{path}:")
    if rest == message:
        return message
    number, colon, tail = rest.partition(":")
    return f"line {number}:{tail}" if colon and number.isdigit() else rest.lstrip()


def report_mapping(hosts: Iterable[HostReport]) -> Mapping[str, HostReport]:
    return {h.host: h for h in hosts}
