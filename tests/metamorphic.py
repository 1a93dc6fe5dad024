"""Metamorphic test helpers for every reader of pasted text: the same fixture as collectors, terminals and chat
tools hand it over must give the same verdict.

``ENVELOPES`` wraps every line of a text the way one collector or terminal does; :func:`mutations` draws one
envelope, a pair of them, prose and headings mixed in, or a tenth of the unprotected lines deleted. The shapes follow
what those tools really print (Ray's actor tag, ``kubectl logs --prefix``, pdsh, ``srun -l``, Open MPI's
``--tag-output``, torchrun's ``--tee``, Fluent Bit JSON records, Grafana/Loki table exports, journald, CloudWatch
exports with a timestamp line per record).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from hypothesis import strategies as st

__all__ = ["ENVELOPES", "PROSE", "apply_all", "mutations", "per_line"]

Mutation = Callable[[str], str]


def per_line(wrap: Callable[[str], str]) -> Mutation:
    def apply(text: str) -> str:
        return "".join(wrap(line) + "\n" for line in text.splitlines())
    return apply


def _cloudwatch(text: str) -> str:
    return "".join(f"2026-03-13T22:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z\n{line}\n"
                   for i, line in enumerate(text.splitlines()))


def _fence(text: str) -> str:
    return "```text\n" + text.rstrip("\n") + "\n```\n"


def _prompt(text: str) -> str:
    return "[admin@gpu-node-07 ~]$ cat /tmp/capture.txt\n" + text


def _crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


ENVELOPES: dict[str, Mutation] = {
    "ray": per_line(lambda s: f"(RayWorkerWrapper pid=4121, ip=10.0.0.2) {s}"),
    "ray-nested": per_line(lambda s: f"(pid=77) (VllmWorker rank=1 pid=4122) {s}"),
    "kubectl": per_line(lambda s: f"[pod/llm-worker-1/main] {s}"),
    "pdsh": per_line(lambda s: f"gpu-node-07: {s}"),
    "srun": per_line(lambda s: f"3: {s}"),
    "mpirun": per_line(lambda s: f"[1,3]<stdout>:{s}"),
    "torchrun": per_line(lambda s: f"[rank3]:{s}"),
    "iso": per_line(lambda s: f"2026-03-13T22:26:02.123456Z {s}"),
    "python-logging": per_line(lambda s: f"2026-03-13 22:26:02,123 - {s}"),
    "bracket-ts": per_line(lambda s: f"[2026-03-13 22:26:02] {s}"),
    "sglang": per_line(lambda s: f"[2026-03-13 22:26:02 TP1] {s}"),
    "syslog": per_line(lambda s: f"Mar 13 22:26:02 gpu-node-07 python3[4121]: {s}"),
    "dmesg": per_line(lambda s: f"[ 1234.567890] {s}"),
    "json": per_line(lambda s: json.dumps({"log": s + "\n", "stream": "stdout",
                                           "kubernetes": {"pod_name": "llm-worker-1"}})),
    "loki": per_line(lambda s: f'2026-03-13 22:26:02.123\t{{pod="llm-worker-1", app="vllm"}}\t{s}'),
    "ansi": per_line(lambda s: f"\x1b[32m{s}\x1b[0m" if s.strip() else s),
    "caret-ansi": per_line(lambda s: f"^[[1m{s}^[[0m" if s.strip() else s),
    "quote": per_line(lambda s: f"> {s}"),
    "cloudwatch": _cloudwatch,
    "crlf": _crlf,
    "fence": _fence,
    "prompt": _prompt,
}

PROSE = (
    "Here is what we see on the second node after the upgrade.",
    "## Output from the failing host",
    "Any idea what is going on? Thanks in advance.",
    "",
    "The job hangs right after this point.",
    "**Environment:**",
    "Update: same result with the latest driver.",
)


def apply_all(text: str, names: list[str]) -> str:
    for name in names:
        text = ENVELOPES[name](text)
    return text


@st.composite
def _mixed_prose(draw: st.DrawFn) -> Mutation:
    spots = draw(st.lists(st.tuples(st.floats(0, 1), st.sampled_from(PROSE)), min_size=1, max_size=4))

    def apply(text: str) -> str:
        lines = text.splitlines()
        for where, prose in sorted(spots, reverse=True):
            lines.insert(round(where * len(lines)), prose)
        return "\n".join(lines) + "\n"
    return apply


def _deleted(seed: int, protect: Callable[[str], bool]) -> Mutation:
    def apply(text: str) -> str:
        lines = text.splitlines()
        free = [i for i, line in enumerate(lines) if not protect(line)]
        drop = set(sorted(free, key=lambda i: (i * 2654435761 + seed) % 4294967296)[: len(free) // 10])
        return "".join(line + "\n" for i, line in enumerate(lines) if i not in drop)
    return apply


def mutations(protect: Callable[[str], bool] = lambda line: False) -> st.SearchStrategy[Mutation]:
    """One envelope, a random pair, prose and headings interleaved, or 10 % of the unprotected lines deleted."""
    names = sorted(ENVELOPES)
    one = st.sampled_from(names).map(lambda name: ENVELOPES[name])
    pair = st.lists(st.sampled_from(names), min_size=2, max_size=2, unique=True).map(
        lambda chosen: (lambda text: apply_all(text, chosen)))
    deleted = st.integers(0, 2**16).map(lambda seed: _deleted(seed, protect))
    return st.one_of(one, pair, _mixed_prose(), deleted)
