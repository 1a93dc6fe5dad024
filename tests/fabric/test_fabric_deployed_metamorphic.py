"""Metamorphic tests over every deployed-config fixture (issue 27, acceptance 1 and 5).

The same config as operators paste it -- after a ``$ cat`` prompt, in a Markdown fence, with CRLF line ends,
with ``...`` where they cut it and comment lines between statements -- must lint exactly as the file does. Cut to
a contiguous half (head -n, a partial copy) it must never exit 2 unless nothing is left, and never gain an error
the whole file does not have: a fragment only turns checks into undeterminable. A deviation may be reported less
specifically in the half (``trust.mismatch`` where the whole file's routed ports gave ``trust.pcp-on-routed``, on
the device rather than each port), so halves are compared by checklist item and device.

One exception is named: an NCCL env file lists overrides, so a file without ``NCCL_IB_TC`` means NCCL's default
traffic class 0 (``nccl.tc-not-lossless``); a half that lost the line cannot be told from a file that never had it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metamorphic import ENVELOPES
from tensorfabric.cli.main import main
from tensorfabric.errors import ParseError
from tensorfabric.fabric.deployed import Deployed
from tensorfabric.fabric.lint import RULES, lint
from tensorfabric.fabric.parsers import parse_text

from .fabric_core_paths import FIXTURES

CONFIGS = sorted(p for folder in ("deployed", "dialects") for p in (FIXTURES / folder).iterdir()
                 if not p.name.endswith(".j2"))
_COMMENTS = {"nxos": "! copied from the runbook, step 3", "eos": "! copied from the runbook, step 3",
             "dell-sonic": "! copied from the runbook, step 3", "junos": "/* copied from the runbook */",
             "cumulus-datapath": "# copied from the runbook", "nvue": "# copied from the runbook",
             "host-script": "# copied from the runbook", "nccl-env": "# copied from the runbook",
             "dell-os10": "! copied from the runbook, step 3", "onyx": "## copied from the runbook",
             "sonic-redis": "# copied from the runbook", "nvue-yaml": "# copied from the runbook",
             "avd": "# copied from the runbook"}
_NOTHING = ("found nothing a lint rule can check", "cannot tell the format")
_ABSENCE_IS_THE_FINDING = {"nccl-env": {"nccl.tc-not-lossless"}}


@cache
def _whole(path: Path) -> tuple[Deployed, frozenset[tuple[str, str, str]]]:
    record = parse_text(path.read_text(), source=path.name, device="dut")
    return record, _verdict(record)


def _verdict(record: Deployed) -> frozenset[tuple[str, str, str]]:
    return frozenset((f.rule, f.severity, f.subject) for f in lint(None, [record]))


def _between(text: str, line: str, every: int = 3) -> str:
    """``line`` inserted after every ``every``-th line (never splitting a line)."""
    out: list[str] = []
    for i, row in enumerate(text.splitlines(), start=1):
        out.append(row)
        if i % every == 0:
            out.append(line)
    return "\n".join(out) + "\n"


def _errors(record: Deployed) -> set[tuple[str, str]]:
    # Compared by checklist item and device: a half may say the same deviation less specifically.
    allowed = _ABSENCE_IS_THE_FINDING.get(record.format, set())
    return {(RULES[f.rule].checklist, f.subject.split(" port ")[0]) for f in lint(None, [record])
            if f.severity == "error" and f.rule not in allowed}


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_pasted_copies_lint_as_the_file_does(path: Path) -> None:
    record, verdict = _whole(path)
    text = path.read_text()
    copies = {
        "prompt": ENVELOPES["prompt"](text),
        "fence": ENVELOPES["fence"](text),
        "crlf": ENVELOPES["crlf"](text),
        "elisions": _between(text, "..."),
    }
    comment = _COMMENTS.get(record.format)
    if comment is not None:
        copies["comments"] = _between(text, comment, every=2)
    everything = _between(text, "...", every=4)
    everything = _between(everything, comment, every=5) if comment is not None else everything
    copies["all at once"] = ENVELOPES["crlf"](ENVELOPES["prompt"](ENVELOPES["fence"](everything)))
    for name, copy in copies.items():
        got = parse_text(copy, source=path.name, device="dut")
        assert got.format == record.format, name
        assert _verdict(got) == verdict, (name, sorted(_verdict(got) ^ verdict))


def _half(path: Path, start_share: float) -> str:
    lines = path.read_text().splitlines()
    size = max(1, len(lines) // 2)
    start = round(start_share * (len(lines) - size))
    return "\n".join(lines[start:start + size]) + "\n"


def _check_half(path: Path, part: str) -> None:
    record, _ = _whole(path)
    try:
        got = parse_text(part, source=path.name, device="dut")
    except ParseError as exc:
        # Only a half in which no QoS statement is left may be refused, and then it says so.
        assert any(reason in str(exc) for reason in _NOTHING), str(exc)
        return
    new = _errors(got) - _errors(record)
    assert not new, (sorted(new), got.read.warnings if got.read else ())


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_contiguous_half_never_gains_an_error(path: Path, share: float) -> None:
    _check_half(path, _half(path, share))


@settings(max_examples=25, deadline=None)
@given(index=st.integers(0, len(CONFIGS) - 1), share=st.floats(0.0, 1.0), size=st.floats(0.2, 0.8))
def test_any_contiguous_cut_never_gains_an_error(index: int, share: float, size: float) -> None:
    path = CONFIGS[index]
    lines = path.read_text().splitlines()
    count = max(1, round(size * len(lines)))
    start = round(share * (len(lines) - count))
    _check_half(path, "\n".join(lines[start:start + count]) + "\n")


# Cuts the property above once drew that gained an error: an excerpt without its PFC lines judged ECN on the queue
# the DSCP map (os10) or the default RoCE priority (SONiC fragment) presumed (R5); a Junos excerpt without the
# classifier line of the CNP DSCP said CNPs had no class (R3), as if the text had said it.
@pytest.mark.parametrize(("name", "share", "size"), [("os10-z9432-roce-lossy-dscp.os10", 0.0, 0.75),
                                                     ("sonic-ecn-on-queue-4-fragment.json", 1.0, 0.75),
                                                     ("junos-set-qfx5240-roce.junos", 0.375, 0.375)])
def test_cuts_that_once_gained_an_error(name: str, share: float, size: float) -> None:
    path = next(p for p in CONFIGS if p.name == name)
    lines = path.read_text().splitlines()
    count = max(1, round(size * len(lines)))
    start = round(share * (len(lines) - count))
    _check_half(path, "\n".join(lines[start:start + count]) + "\n")


def test_every_config_fixture_is_covered() -> None:
    formats = {_whole(p)[0].format for p in CONFIGS}
    assert len(CONFIGS) >= 60 and len(formats) >= 13, formats


_TEN_MB = 10 * 1024 * 1024


@pytest.mark.parametrize("blob", [b"a" * _TEN_MB, b"{" * _TEN_MB, b'"' * _TEN_MB, b"nv set qos " * (_TEN_MB // 11)],
                         ids=["letters", "braces", "quotes", "words"])
def test_a_ten_megabyte_line_is_one_line_of_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   blob: bytes) -> None:
    path = tmp_path / "huge.cfg"
    path.write_bytes(blob)
    assert main(["fabric", "lint", "--deployed", str(path)]) == 2
    _, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "over 65536 characters skipped unread" in err


def test_binary_input_is_one_line_of_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config_db.json"
    path.write_bytes(bytes(range(256)) * 4096)
    assert main(["fabric", "lint", "--deployed", str(path)]) == 2
    _, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "not text" in err
