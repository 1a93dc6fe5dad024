"""The intake: every envelope a collector or terminal puts around a paste comes off, and nothing else does."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metamorphic import ENVELOPES, apply_all
from tensorfabric.errors import ParseError
from tensorfabric.intake import MAX_LINE_CHARS, Tally, normalise

# Content lines of the kinds our readers take, in the shapes the tools print them (none may look like an envelope).
CONTENT = (
    "gpu-a02:5512:5590 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB ens1f0np0:10.1.1.2<0>",
    "gpu-a02:5512:5590 [3] NCCL INFO Channel 00/0 : 3[3] -> 11[3] [send] via NET/IB/1/GDRDMA",
    "mlx5_0\t1\t3\tfe80:0000:0000:0000:0a5c:ebff:fe0d:2b3c\t\tv2\tens1f0np0",
    "\tGID[  3]:\t\t::ffff:192.168.1.1, RoCE v2",
    "hca_id:\tmlx5_0",
    "[1712345678.123456] [gpu-a02:4121:0]     ucp_worker.c:1888 UCX  INFO  ep_cfg[1]: tag(rc_mlx5/mlx5_0:1)",
    "   134217728      33554432     float     sum      -1   1120.3  119.80  224.63      0   1118.7  119.98  224.96"
    "      0",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"
    " #wrong",
    "# Avg bus bandwidth    : 118.455",
    "     rx_prio3_pause: 1042",
    "Ethernet0      PFC3     1,234",
    "interface Ethernet1/1",
    "  priority-flow-control mode on",
    "DEVICE_NEIGHBOR|Ethernet0",
    "",
)


def content_lines(text: str) -> list[str]:
    return [line.text for line in normalise(text).lines if line.kind in ("text", "blank")]


@pytest.mark.parametrize("name", sorted(ENVELOPES))
def test_each_envelope_comes_off_and_leaves_the_content(name: str) -> None:
    text = "\n".join(CONTENT) + "\n"
    got = [s for s in content_lines(ENVELOPES[name](text)) if s.strip()]
    assert got == [s for s in content_lines(text) if s.strip()]
    assert len(got) == len([s for s in CONTENT if s.strip()])
    if name not in ("crlf", "fence", "prompt", "cloudwatch"):
        assert normalise(ENVELOPES[name](text)).envelopes, name


@settings(max_examples=60, deadline=None)
@given(names=st.lists(st.sampled_from(sorted(ENVELOPES)), min_size=1, max_size=3, unique=True),
       lines=st.lists(st.sampled_from([c for c in CONTENT if c]), min_size=2, max_size=12))
def test_stacked_envelopes_come_off_in_any_order(names: list[str], lines: list[str]) -> None:
    plain = "\n".join(lines) + "\n"
    assert [s for s in content_lines(apply_all(plain, names)) if s.strip()] == content_lines(plain)


def test_collectors_name_the_origin_of_each_line() -> None:
    text = "node01: a 1\nnode02: b 2\nnode01: c 3\n"
    assert [(line.origin, line.text) for line in normalise(text).lines] == [
        ("node01", "a 1"), ("node02", "b 2"), ("node01", "c 3")]
    assert set(normalise(text).by_origin()) == {"node01", "node02"}
    ray = normalise("(RayWorkerWrapper pid=4121, ip=10.0.0.2) x\n(RayWorkerWrapper pid=9, ip=10.0.0.3) y\n")
    assert [line.origin for line in ray.lines] == ["10.0.0.2", "10.0.0.3"]
    mpi = normalise("[1,0]<stdout>:a\n[1,1]<stderr>:b\n")
    assert [line.origin for line in mpi.lines] == ["rank0", "rank1"]


def test_key_value_text_is_not_taken_for_a_pdsh_prefix() -> None:
    text = "hca_id:\tmlx5_0\ntransport: InfiniBand (0)\nfw_ver: 28.39.1002\nnode_guid: 0c42:a103:0065:78e4\n"
    assert content_lines(text) == text.splitlines()
    yaml = "interface: swp1\nqos: roce\nmode: lossless\n"
    assert content_lines(yaml) == yaml.splitlines()


def test_prompts_become_commands_and_split_sections() -> None:
    text = ("user@node1:~$ show_gids\nDEV\tPORT\n[root@node2 ~]# ibv_devinfo -v\nhca_id:\tmlx5_0\n"
            "leaf1# show queuing interface\nEthernet1/1 queuing information:\n")
    sections = normalise(text).sections()
    assert [(s.title, s.origin, [line.text for line in s.lines]) for s in sections] == [
        ("show_gids", "node1", ["DEV\tPORT"]), ("ibv_devinfo -v", "node2", ["hca_id:\tmlx5_0"]),
        ("show queuing interface", "leaf1", ["Ethernet1/1 queuing information:"])]


def test_table_lines_starting_with_hash_stay_content() -> None:
    text = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20\n"
            "#  Rank  0 Group  0 Pid  81 on gpu-01 device  0 [0x18] NVIDIA H100 80GB HBM3\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
            "# Avg bus bandwidth    : 118.455\n# Out of bounds values : 0 OK\n")
    assert [line.kind for line in normalise(text).lines] == ["text"] * 5
    assert [line.kind for line in normalise("# show_gids\n## Node 2\n# Output of node 3\n").lines] == [
        "command", "heading", "heading"]
    assert [line.kind for line in normalise("# show_gids\n", hash_prompts=False).lines] == ["text"]


def test_elisions_fences_and_timestamp_only_lines_are_recorded_not_read() -> None:
    text = "```\nline one\n...\n[...]\n… (20 lines omitted)\nline two\n```\n2026-03-13T22:26:02Z\n"
    got = normalise(text)
    assert [line.text for line in got.lines if line.kind == "text"] == ["line one", "line two"]
    assert got.elided == (3, 4, 5)
    assert {"Markdown fences", "elisions", "timestamps"} <= set(got.envelopes)


def test_hard_wrapped_lines_are_rejoined_only_when_the_whole_parses() -> None:
    text = normalise("NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GD\nRDMA\nnext line\n")
    whole = text.rejoined(lambda s: s.endswith(("/GDRDMA", "line")))
    assert [line.text for line in whole.lines] == [
        "NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA", "next line"]
    assert whole.joined == (1,)
    assert text.rejoined(lambda s: s == "never").lines == text.lines


@pytest.mark.parametrize("data", [b"\x00\x01\x02binary", bytes(range(1, 32)) * 50, b"\xff\xfe\x00", b"",
                                  b" \n\t\n", bytes(range(128, 256)) * 40])
def test_not_text_and_empty_input_are_one_line_parse_errors(data: bytes) -> None:
    with pytest.raises(ParseError) as info:
        normalise(data, source="blob.bin", what="an NCCL log")
    assert "\n" not in str(info.value) and "blob.bin" in str(info.value)


def test_a_few_bad_bytes_and_marks_do_not_refuse_the_text() -> None:
    got = normalise(b"\xef\xbb\xbfline one\xff\r\nline two\r\n")
    assert [line.text for line in got.lines] == ["line one\ufffd", "line two"]
    assert got.envelope_counts["invalid UTF-8 bytes"] == 1 and "BOM" in got.envelopes and "CRLF" in got.envelopes
    assert [line.text for line in normalise("a\nb\n".encode("utf-16")).lines] == ["a", "b"]


def test_the_tally_reports_what_was_read_and_refuses_only_when_nothing_was() -> None:
    text = normalise("(RayWorkerWrapper pid=1, ip=10.0.0.2) NCCL INFO a\nprose here\n"
                     "(RayWorkerWrapper pid=1, ip=10.0.0.2) NCCL INFO b\n", source="job.log")
    tally = Tally(text, "NCCL log")
    with pytest.raises(ParseError, match="nothing here reads as NCCL log: expected NCCL INFO lines; the first line"):
        tally.require("NCCL INFO lines")
    tally.use(text.lines[0])
    tally.not_understood(text.lines[2])
    tally.warn(text.lines[0], "GID index 'x' is not a number")
    tally.version = "2.27.3"
    tally.require("NCCL INFO lines")
    read = tally.report()
    assert read.summary() == ("read job.log as NCCL 2.27.3 log (Ray prefix): 1 line used, 1 not understood (3), "
                              "1 other skipped, 1 warning")
    assert read.to_dict()["not_understood"] == [3] and read.to_dict()["warnings"] == [
        "line 1: GID index 'x' is not a number"]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400))
def test_any_text_normalises_or_is_refused_with_a_parse_error(text: str) -> None:
    try:
        got = normalise(text)
    except ParseError:
        return
    assert all(line.number >= 1 for line in got.lines)


@pytest.mark.parametrize("fill", ["(" * 1, "[", "2026-03-13T", "user@", "node01: ", "\x1b[", "> ", "# ", "{\"a\":"])
def test_a_ten_megabyte_line_is_reported_not_scanned(fill: str) -> None:
    body = "x" + (fill * (10_000_000 // len(fill)))
    start = time.process_time()
    got = normalise(body + "\nNCCL INFO short line\n")
    assert got.long_lines == (1,) and [line.text for line in got.lines] == ["NCCL INFO short line"]
    below = fill * ((MAX_LINE_CHARS - 10) // len(fill))
    normalise(below + "\n" + below + "\n")
    assert time.process_time() - start < 60  # a bound against hangs, not a speed claim (benchmarks/ measures)
