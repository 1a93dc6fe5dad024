"""Metamorphic tests over the whole NCCL/RCCL log corpus: the same fixture as collectors, terminals and chat tools
hand it over gives the same (transport, GPUDirect, scope, evidence); and a log without its data-path lines (channels,
QP lines) gives weaker evidence, never another transport."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings

from metamorphic import ENVELOPES, mutations
from tensorfabric.host.nccl_lines import message_of
from tensorfabric.host.nccl_log import NcclLogReport, parse_nccl_log

from .conftest import LOGS

FIXTURES = sorted(p.name for p in LOGS.glob("*.log"))
_TEXT = {name: (LOGS / name).read_text() for name in FIXTURES}
_RANK = {"none": 0, "devices": 1, "selected": 2, "data-path": 3}


def _key(report: NcclLogReport) -> tuple[object, ...]:
    return report.transport, report.gpudirect, report.scope, report.evidence


_BASE = {name: _key(parse_nccl_log(text, source=name)) for name, text in _TEXT.items()}


@pytest.mark.parametrize("envelope", sorted(ENVELOPES))
def test_every_envelope_keeps_every_verdict(envelope: str) -> None:
    wrap = ENVELOPES[envelope]
    changed = {name: (_BASE[name], _key(parse_nccl_log(wrap(text), source=name)))
               for name, text in _TEXT.items()}
    assert {name: pair for name, pair in changed.items() if pair[0] != pair[1]} == {}


@pytest.mark.parametrize("name", FIXTURES)
@settings(max_examples=25, deadline=None)
@given(mutate=mutations(protect=lambda line: "NCCL" in line))
def test_pairs_prose_and_deletions_keep_the_verdict(name: str, mutate: Callable[[str], str]) -> None:
    assert _key(parse_nccl_log(mutate(_TEXT[name]), source=name)) == _BASE[name]


def _data_path(line: str) -> bool:
    found = message_of(line)
    if found is None:
        return False
    message = found[1]
    return (message.startswith(("Channel ", "Ring ")) and " via NET/" in message) or (
        message.startswith("NET/IB") and (" qpn " in message or " qp_num " in message))


@pytest.mark.parametrize("name", FIXTURES)
def test_dropping_the_data_path_lowers_evidence_and_never_flips_the_transport(name: str) -> None:
    kept = [line for line in _TEXT[name].splitlines() if not _data_path(line)]
    if len(kept) == len(_TEXT[name].splitlines()):
        return
    before = _BASE[name]
    after = _key(parse_nccl_log("\n".join(kept) + "\n", source=name))
    assert after[0] in (before[0], "unknown"), (before, after)
    assert _RANK[str(after[3])] <= _RANK[str(before[3])] and after[3] != "data-path", (before, after)
