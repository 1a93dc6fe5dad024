"""Reading doctor reports however they were collected: fixtures in the collectors' real shapes, the tolerate-then-
report contract, metamorphic envelopes, and inputs that must stay linear."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metamorphic import ENVELOPES, mutations
from tensorfabric.errors import InputError, ParseError
from tensorfabric.fleet.check import check_fleet
from tensorfabric.fleet.reports import read_report_text, read_reports

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fleet"
ONE = (FIXTURES / "daemonset" / "gpu-a04.json").read_text()


def _named(paths: list[str]) -> set[tuple[str, str]]:
    found = read_reports(paths)
    return {(h, f.rule) for f in check_fleet(found.hosts).findings for h in f.evidence["hosts"]}


@pytest.mark.parametrize(("fixture", "hosts", "named"), [
    ("daemonset", 6, {("gpu-a04", "fleet.mtu")}),
    ("pdsh-interleaved.txt", 3, {("gpu-b02", "fleet.gid-index"), ("gpu-b02", "fleet.doctor")}),
    ("kubectl-prefix.txt", 3, {("gpu-c03", "fleet.driver-firmware")}),
    ("jq-compact.jsonl", 4, {("gpu-d03", "fleet.versions")}),
    ("srun-labelled.txt", 3, {("gpu-e02", "fleet.link-speed")}),
])
def test_each_collected_shape_names_the_odd_host_and_nothing_else(fixture: str, hosts: int,
                                                                    named: set[tuple[str, str]]) -> None:
    found = read_reports([str(FIXTURES / fixture)])
    assert len(found.hosts) == hosts
    assert _named([str(FIXTURES / fixture)]) == named


def test_two_hosts_that_differ_are_both_named() -> None:
    # No majority with two: neither can be called the odd one out, so both are.
    report = check_fleet(read_reports([str(FIXTURES / "chat-paste.md")]).hosts)
    assert {(h, f.rule) for f in report.findings for h in f.evidence["hosts"]} >= {
        ("gpu-f01", "fleet.traffic-class"), ("gpu-f02", "fleet.traffic-class")}
    assert "no value is held by more hosts than another" in report.findings[0].message


def test_every_fixture_together_names_exactly_the_mutated_hosts() -> None:
    named = {h for h, _ in _named([str(FIXTURES / p) for p in (
        "daemonset", "pdsh-interleaved.txt", "kubectl-prefix.txt", "jq-compact.jsonl", "srun-labelled.txt",
        "chat-paste.md", "schema1.json")])}
    assert named == {"gpu-a04", "gpu-b02", "gpu-c03", "gpu-d03", "gpu-e02", "gpu-f02"}


def test_what_each_input_was_read_as() -> None:
    found = read_reports([str(FIXTURES / p) for p in ("daemonset", "pdsh-interleaved.txt", "chat-paste.md")])
    assert found.skipped[0][0].endswith("collect.log")
    assert "nothing here reads as doctor --json report" in found.skipped[0][1]
    summaries = {Path(r.source).name: r.summary() for r in found.reads}
    assert "(pdsh prefix)" in summaries["pdsh-interleaved.txt"] and "3 sections" in summaries["pdsh-interleaved.txt"]
    assert "Markdown fences" in summaries["chat-paste.md"] and "other skipped" in summaries["chat-paste.md"]
    assert found.summary().startswith("read 11 host reports from 9 inputs, 1 skipped")


def test_an_old_report_is_read_with_a_warning_and_never_votes_on_what_it_lacks() -> None:
    found = read_reports([str(FIXTURES / "schema1.json"), str(FIXTURES / "daemonset")])
    old = next(h for h in found.hosts if h.host == "gpu-g01")
    assert old.schema_version == 1 and "schema_version 1" in old.warnings[0]
    assert found.reads[0].label == "doctor --json v1 report"
    assert "gpu-g01" not in {h for f in check_fleet(found.hosts).findings for h in f.evidence["hosts"]}


def test_malformed_values_are_warnings_naming_the_field(tmp_path: Path) -> None:
    doc = json.loads(ONE)
    doc["host"]["rdma_ports"][0]["mtu"] = "jumbo"
    doc["host"]["rdma_ports"].append(7)
    doc["data_netdevs"]["eno1"]["speed_mbps"] = {"a": 1}
    doc["findings"].append({"rule": "x"})
    hosts, read = read_report_text(json.dumps(doc, indent=2), source="odd.json")
    assert [p.mtu for p in hosts[0].ports] == [None, 1500]
    assert set(hosts[0].warnings) == {
        "host.rdma_ports[0].mtu: 'jumbo' is not a number; ignored",
        "host.rdma_ports[2]: expected an object, got int; ignored",
        "data_netdevs.eno1.speed_mbps: {'a': 1} is not a number; ignored",
        "findings[1]: not a finding (rule, severity, subject, message); ignored"}
    assert len(read.warnings) == 4 and read.warnings[0].startswith("gpu-a04: ")


def test_unreadable_inputs_are_skipped_with_the_reason(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "daemonset" / "gpu-a01.json", tmp_path / "gpu-a01.json")
    (tmp_path / "core").write_bytes(b"\x7fELF\x00\x00\x01" * 50)
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "notes.txt").write_text("collected with pdsh on Tuesday\n")
    (tmp_path / ".hidden").write_text("{}")
    found = read_reports([str(tmp_path)])
    assert [h.host for h in found.hosts] == ["gpu-a01"]
    reasons = dict(found.skipped)
    assert set(reasons) == {str(tmp_path / n) for n in ("core", "empty.json", "notes.txt")}
    assert "binary" in reasons[str(tmp_path / "core")] or "not text" in reasons[str(tmp_path / "core")]
    assert "empty" in reasons[str(tmp_path / "empty.json")]
    assert "the first line is 'collected with pdsh on Tuesday'" in reasons[str(tmp_path / "notes.txt")]


def test_no_report_at_all_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing to see\n")
    with pytest.raises(InputError, match="no doctor report among 1 input"):
        read_reports([str(tmp_path)])
    (tmp_path / "notes.txt").unlink()
    with pytest.raises(InputError, match="holds no files"):
        read_reports([str(tmp_path)])
    with pytest.raises(InputError, match="give the doctor reports"):
        read_reports([])


def test_stdin_and_duplicate_names(tmp_path: Path) -> None:
    found = read_reports(["-", str(FIXTURES / "daemonset" / "gpu-a01.json")], stdin=io.BytesIO(ONE.encode()))
    assert [h.host for h in found.hosts] == ["gpu-a04", "gpu-a01"]
    twice = read_reports([str(FIXTURES / "daemonset" / "gpu-a01.json")] * 2)
    assert len({h.host for h in twice.hosts}) == 2 and "2 reports name host 'gpu-a01'" in twice.warnings[0]


def test_a_report_without_a_host_name_takes_the_collector_prefix_or_the_file_name() -> None:
    doc = json.loads(ONE)
    del doc["host"]["hostname"]
    text = json.dumps(doc, indent=2)
    assert read_report_text(text, source="/reports/node17.json")[0][0].host == "node17"
    pdsh = "".join(f"node18: {line}\n" for line in text.splitlines())
    assert read_report_text(pdsh, source="paste.txt")[0][0].host == "node18"


@pytest.mark.parametrize("name", sorted(ENVELOPES))
def test_every_envelope_gives_the_same_facts(name: str) -> None:
    base, _ = read_report_text(ONE, source="x.json")
    hosts, read = read_report_text(ENVELOPES[name](ONE), source="x.json")
    assert hosts == base, read.summary()


@given(mutate=mutations(protect=lambda line: True))
@settings(max_examples=25, deadline=None)
def test_mutated_pastes_give_the_same_verdict(mutate: object) -> None:
    base = read_reports([str(FIXTURES / "daemonset")]).hosts
    pasted, _ = read_report_text(mutate(ONE), source="paste.txt")  # type: ignore[operator]
    others = [h for h in base if h.host != "gpu-a04"]
    verdict = {(h, f.rule) for f in check_fleet([*others, *pasted]).findings for h in f.evidence["hosts"]}
    assert verdict == {("gpu-a04", "fleet.mtu")}


@pytest.mark.parametrize("data", [
    "[" * 200_000, "{" * 200_000, '{"a": ' * 100_000, "{" + "a" * 10_000_000, "{\n" * 50_000 + "}\n",
    ("{\n" + '  "a": 1,\n' * 20 + "prose\n") * 500,
], ids=["deep-array", "deep-object", "deep-members", "10MB-line", "open-braces", "broken-blocks"])
def test_hostile_inputs_end_in_a_parse_error(data: str) -> None:
    # When nothing in it reads as a report, brackets past the cap are the reason given; a 10 MB line is "no report".
    said = ("expected `tensorfabric doctor --json` output" if len(data) > 5_000_000
            else "nested deeper than 64 levels at column")
    with pytest.raises(ParseError, match=re.escape(said)):
        read_report_text(data, source="hostile")


@given(data=st.one_of(st.binary(max_size=400), st.text(max_size=400),
                      st.lists(st.sampled_from(ONE.splitlines()), max_size=40).map("\n".join)))
@settings(max_examples=25, deadline=None)
def test_random_input_is_read_or_refused_with_a_parse_error(data: str | bytes) -> None:
    try:
        hosts, read = read_report_text(data, source="random")
    except ParseError:
        return
    assert hosts and read.used > 0
