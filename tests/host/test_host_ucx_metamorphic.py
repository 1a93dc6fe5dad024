"""The UCX reader's verdicts survive the way logs are really handed over: every fixture wrapped in each collector
or terminal envelope and in random pairs of them, interleaved with prose and headings, or with a tenth of the lines
that carry no UCX fact deleted, gives the same verdict per scope (inter-node, intra-node, self)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings

from metamorphic import ENVELOPES, mutations
from tensorfabric.host.ucx_report import UcxLogReport, parse_ucx_report

UCX_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "ucx_logs"
FIXTURES = sorted(p.name for p in UCX_LOGS.glob("*.log"))


def _protect(line: str) -> bool:
    return "UCX" in line or "ucp" in line or "|" in line


def _verdict(report: UcxLogReport) -> tuple[object, ...]:
    scopes = tuple((s.scope, s.kind, s.transport.lanes, s.inferred) for s in report.by_scope)
    return report.verdict, report.transport.lanes, scopes, tuple(p.kind for p in report.problems)


def _read(text: str) -> tuple[object, ...]:
    return _verdict(parse_ucx_report(text, source="m"))


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("envelope", sorted(ENVELOPES))
def test_each_envelope_keeps_the_verdict(name: str, envelope: str) -> None:
    text = (UCX_LOGS / name).read_text()
    assert _read(ENVELOPES[envelope](text)) == _read(text)


@pytest.mark.parametrize("name", FIXTURES)
@settings(max_examples=25, deadline=None)
@given(mutate=mutations(protect=_protect))
def test_mutations_keep_the_verdict(name: str, mutate: Callable[[str], str]) -> None:
    text = (UCX_LOGS / name).read_text()
    assert _read(mutate(text)) == _read(text)
