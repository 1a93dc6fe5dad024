"""What a user hands the monitor, read into library objects: the links file, ``--set`` thresholds, ``--label``
pairs and source specs. Each refusal is an :class:`~tensorfabric.errors.InputError` in one line that names the
option and the accepted form."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from tensorfabric.errors import InputError
from tensorfabric.telemetry.detectors import Thresholds
from tensorfabric.telemetry.exposition import RESERVED_LABELS
from tensorfabric.telemetry.sources import SOURCES
from tensorfabric.topology import Endpoint

__all__ = ["Links", "const_labels", "read_links", "source_spec", "thresholds"]

Links = tuple[tuple[Endpoint, Endpoint], ...]

_LINK_EXAMPLE = "'leaf0:Ethernet0 h0:1'"
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,99}")


def read_links(path: str | None) -> Links:
    """``--links FILE``: a YAML/JSON list of ``"dev:port dev:port"`` strings or ``[a, b]`` pairs (the cabling the
    deadlock detector checks a pause cycle against)."""
    if path is None:
        return ()
    from tensorfabric.yamlload import read_yaml

    data = read_yaml(path, "--links", root=list, example=f"a flat YAML or JSON list of links such as {_LINK_EXAMPLE}")
    pairs = []
    for index, item in enumerate(data):
        ends = item.split() if isinstance(item, str) else item
        if not isinstance(ends, list) or len(ends) != 2 or not all(isinstance(e, str) for e in ends):
            raise InputError(f"--links {path!r}: item {index} {item!r} is not two endpoints like {_LINK_EXAMPLE}")
        what = f"links[{index}]"
        pairs.append((Endpoint.parse(ends[0], what=what), Endpoint.parse(ends[1], what=what)))
    return tuple(pairs)


def thresholds(settings: tuple[str, ...] = (), links: Links = ()) -> Thresholds:
    """The detectors' thresholds with ``--set KEY=VALUE`` overrides (``-`` or ``_`` in KEY) and the cabling."""
    fields = {f.name: f for f in dataclasses.fields(Thresholds) if f.name != "links"}
    values: dict[str, Any] = {"links": links}
    for item in settings:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in fields:
            raise InputError(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(sorted(fields))}")
        if key == "lossless_priorities":
            values[key] = tuple(p.strip() for p in text.split(",") if p.strip())
            continue
        try:
            number = float(text)
        except ValueError as exc:
            raise InputError(f"--set {item!r}: {text!r} is not a number") from exc
        values[key] = int(number) if fields[key].type in ("int", int) else number
    return Thresholds(**values)


def const_labels(items: tuple[str, ...]) -> dict[str, str]:
    """``--label KEY=VALUE`` pairs; a key the exporter itself uses, or one Prometheus reserves, is refused."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or _LABEL.fullmatch(key) is None or key.startswith("__"):
            raise InputError(f"--label {item!r}: expected KEY=VALUE with KEY a label name such as cluster")
        if key in RESERVED_LABELS:
            raise InputError(f"--label {item!r}: {key!r} is a label the exporter or Prometheus sets itself; "
                             "choose another name (e.g. cluster, site)")
        out[key] = value
    return out


def source_spec(spec: str) -> str:
    """``--source PATH`` (no KIND, an existing file) is ``file:PATH``: the format is sniffed from the text."""
    kind, sep, _ = spec.partition(":")
    if (not sep or kind not in SOURCES) and Path(spec).is_file():
        return f"file:{spec}"
    return spec
