"""``--source file:PATH``: counters from pasted text, read exactly as the table in the fixtures directory says.

The fixtures were written in the shapes of real published outputs (docs/formats.md, "Counters", names them); the table
(``tests/fixtures/telemetry/paste/expected.yaml``) holds their exact values. The metamorphic tests wrap the same
fixtures the way collectors, terminals and chat tools do, and require the same samples and no source error.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metamorphic import mutations
from tensorfabric.errors import ParseError
from tensorfabric.samples import Sample
from tensorfabric.telemetry.sources import open_source
from tensorfabric.telemetry.sources.base import CounterFilter, SourceContext
from tensorfabric.telemetry.sources.generic import GenericBudget
from tensorfabric.telemetry.sources.paste import read_counters

from .telemetry_support import FIXTURES, ctx

PASTE = FIXTURES / "paste"
TABLE: dict[str, dict[str, Any]] = yaml.safe_load((PASTE / "expected.yaml").read_text())
NAMES = sorted(TABLE)
_ROW = re.compile(r"(\w+)((?: [\w-]+=\S+)*)(?: = (\S+))?")
_RULE = re.compile(r"[-=+|_ ]{3,}")


def _row(text: str) -> tuple[str, dict[str, str], float | None]:
    match = _ROW.fullmatch(text.strip())
    assert match is not None, f"expected.yaml row {text!r} is not 'metric label=value ... = value'"
    labels = dict(pair.split("=", 1) for pair in match.group(2).split())
    return match.group(1), labels, float(match.group(3)) if match.group(3) is not None else None


def _matching(samples: Iterable[Sample], metric: str, labels: dict[str, str]) -> list[Sample]:
    return [s for s in samples if s.metric == metric and all(s.labels.get(k, "") == v for k, v in labels.items())]


def _read(name: str, text: str | None = None) -> tuple[list[Sample], Any]:
    data = (PASTE / name).read_text() if text is None else text
    return read_counters(data, name=f"file:{name}", ctx=ctx(),
                         budget=GenericBudget(CounterFilter(), name), stem=Path(name).stem)


def test_every_fixture_has_a_row_in_the_table() -> None:
    files = {p.name for p in PASTE.iterdir() if p.name != "expected.yaml"}
    assert files == set(TABLE)


@pytest.mark.parametrize("name", NAMES)
def test_fixture_reads_exactly_what_the_table_says(name: str) -> None:
    entry = TABLE[name]
    reading = open_source(f"file:{PASTE / name}", ctx()).read()
    samples = list(reading.samples)
    assert reading.errors == ()
    assert len(samples) == entry["samples"]
    for key, value in entry.get("labels", {}).items():
        assert {s.labels.get(key) for s in samples} == {value}, key
    for text in entry["expect"]:
        metric, labels, value = _row(text)
        found = _matching(samples, metric, labels)
        assert len(found) == 1, f"{text}: {len(found)} samples"
        assert found[0].value == pytest.approx(value, rel=1e-12), text
    for text in entry.get("absent", []):
        metric, labels, _ = _row(text)
        assert _matching(samples, metric, labels) == [], text
    report = reading.read
    assert report is not None and report.not_understood == () and report.warnings == ()
    assert report.format == f"counter output ({', '.join(entry['formats'])})"


# --- metamorphic: the same counters whatever the paste is wrapped in ------------------------------------------

def _key(sample: Sample) -> tuple[str, tuple[tuple[str, str], ...], float]:
    """A sample without the labels an envelope may legitimately change: the host (a prompt or collector names one)
    and, for switch output, the switch name it gives the device."""
    labels = {k: v for k, v in sample.labels.items() if k != "host" and not (k == "device" and v == sample.labels.get(
        "host"))}
    return sample.metric, tuple(sorted(labels.items())), sample.value


def _keys(samples: Iterable[Sample]) -> Counter[tuple[str, tuple[tuple[str, str], ...], float]]:
    return Counter(map(_key, samples))


def _content(line: str) -> bool:
    """Lines the deletion mutation must keep: everything but blank lines and table rules."""
    stripped = line.strip()
    return bool(stripped) and _RULE.fullmatch(stripped) is None


BASELINE = {name: _keys(_read(name)[0]) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutate=mutations(protect=_content))
def test_wrapped_pastes_give_the_same_samples_and_no_error(name: str, mutate: Any) -> None:
    text = mutate((PASTE / name).read_text())
    samples, report = _read(name, text)
    assert _keys(samples) == BASELINE[name], report.summary()
    assert report.warnings == ()


@pytest.mark.parametrize("first", NAMES)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(second=st.sampled_from(NAMES))
def test_concatenated_pastes_give_both_sets_of_samples(first: str, second: str) -> None:
    joined = (PASTE / first).read_text().rstrip("\n") + "\n\n" + (PASTE / second).read_text()
    samples, _ = _read("joined.txt", joined)
    alone = {s.series: s for s in _read("joined.txt", (PASTE / first).read_text())[0]}
    alone.update({s.series: s for s in _read("joined.txt", (PASTE / second).read_text())[0]})
    assert _keys(samples) == _keys(alone.values())


_PROMPT = re.compile(r"(?:\[?[\w.-]+@[\w.-]+[^$#>]{0,40}[$#>]|[\w.-]+#|#) ?(?:show|sudo|ethtool|rdma|for|curl|docker|"
                     r"cat|grep|pfcwd)\b")


def _commands(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines()) if _PROMPT.match(line)]


SPLITTABLE = [name for name in NAMES if len(_commands((PASTE / name).read_text())) >= 2]


@pytest.mark.parametrize("name", SPLITTABLE)
def test_a_paste_split_at_a_command_reads_as_its_two_parts(name: str) -> None:
    lines = (PASTE / name).read_text().splitlines(keepends=True)
    at = _commands("".join(lines))[1]
    whole = {s.series: s for s in _read(name)[0]}
    parts = {s.series: s for s in _read(name, "".join(lines[:at]))[0]}
    parts.update({s.series: s for s in _read(name, "".join(lines[at:]))[0]})  # the later dump wins, as in one paste
    assert _keys(parts.values()) == _keys(whole.values())


# --- tolerate, then report -------------------------------------------------------------------------------------

def test_a_malformed_cell_is_a_warning_naming_the_line_and_the_rest_is_read() -> None:
    text = (PASTE / "sonic_pfc_counters.txt").read_text().replace("15,437", "15,4x7")
    samples, report = _read("bad.txt", text)
    assert len(samples) == 47
    assert report.warnings == ("line 4: PFC3: '15,4x7' is not a number",)


def test_a_row_the_table_cannot_hold_is_listed_not_understood() -> None:
    text = (PASTE / "sonic_pfc_counters.txt").read_text().replace("Ethernet8       0       0       0     212",
                                                                     "Ethernet8       0       0")
    samples, report = _read("short.txt", text)
    assert report.not_understood == (5,)
    assert len(samples) == 40


def test_prose_headings_and_prompts_are_not_source_errors(tmp_path: Path) -> None:
    path = tmp_path / "ticket.md"
    path.write_text("## Leaf PFC counters\n\nHere is what we see:\n\n" + (PASTE / "sonic_pfc_counters.txt").read_text()
                    + "\n# show queue counters\n" + "Thanks!\n")
    reading = open_source(f"file:{path}", ctx()).read()
    assert reading.errors == () and len(reading.samples) == 48
    assert reading.read is not None and reading.read.skipped == 2


@pytest.mark.parametrize(("data", "message"), [
    (b"\x00\x01binary\x00", "not text"),
    (b"", "empty input"),
    (b"Nothing here is a counter.\nJust words.\n", "nothing here reads as counter output"),
])
def test_not_text_empty_or_nothing_recognised_is_refused_at_open(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(data)
    with pytest.raises(ParseError, match=message) as caught:
        open_source(f"file:{path}", ctx())
    assert "\n" not in str(caught.value)
    if "nothing" in message:
        assert "Nothing here is a counter." in str(caught.value)


def test_nameless_ethtool_dumps_are_numbered_never_merged() -> None:
    dump = "NIC statistics:\n     rx_prio3_pause: {}\n"
    samples, _ = _read("three.txt", dump.format(1) + dump.format(2) + dump.format(3))
    assert sorted((s.labels["device"], s.value) for s in samples) == [("three", 1), ("three-2", 2), ("three-3", 3)]


def test_interleaved_hosts_are_read_apart() -> None:
    lines = ["NIC statistics:", "     rx_prio3_pause: 7", "     tx_prio3_pause: 9"]
    text = "".join(f"{host}: {line}\n" for line in lines for host in ("node-01", "node-02"))
    samples, _ = _read("pdsh.txt", text)
    assert {(s.labels["host"], s.labels["direction"], s.value) for s in samples} == {
        ("node-01", "rx", 7), ("node-01", "tx", 9), ("node-02", "rx", 7), ("node-02", "tx", 9)}


def test_generic_counters_are_bounded_per_source() -> None:
    narrow = SourceContext(host="h0", clock=lambda: 1.0, counters=CounterFilter.parse(None, None, 2))
    reading = open_source(f"file:{PASTE / 'efa_counters.txt'}", narrow).read()
    assert len(reading.samples) == 3  # lifespan is canonical; two generic series, then the cap
    assert reading.errors and "more than 2 counters" in reading.errors[0]


def test_a_long_line_of_any_shape_stays_fast() -> None:
    # shapes that could make a backtracking regex crawl; each is read (and refused) in one pass
    for shape in ("Port  " * 9000, "|  " * 20000, 'x{a="' * 10000, "1," * 30000, "Ethernet0 " * 6000 + "N/A",
                  "Priority : 3 " * 4000, "a = " * 15000, "link mlx5_0/1 " + "c 1 " * 15000):
        text = "NIC statistics:\n     rx_prio3_pause: 1\n" + shape + "\n"
        samples, _ = _read("long.txt", text)
        assert len(samples) >= 1
