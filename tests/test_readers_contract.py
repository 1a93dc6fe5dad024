"""The contract every reader of pasted text keeps (ARCHITECTURE.md, "Readers generalise"): one recognised line in a
paste of prose is read, never refused, and the read report says what was and was not understood; binary and empty
input are one-line parse errors; the CLI turns them into exit 2 with one line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tensorfabric.cli.main import main
from tensorfabric.errors import ParseError
from tensorfabric.intake import ReadReport


def _nccl(text: str | bytes) -> ReadReport:
    from tensorfabric.host.nccl_log import parse_nccl_log

    read = parse_nccl_log(text, source="paste").read
    assert read is not None
    return read


def _ucx(text: str | bytes) -> ReadReport:
    from tensorfabric.host.ucx_report import parse_ucx_report

    return parse_ucx_report(text, source="paste").read


def _gids(text: str | bytes) -> ReadReport:
    from tensorfabric.host.gid_capture import parse_gid_capture

    return parse_gid_capture(text, source="paste").read


def _nccl_tests(text: str | bytes) -> ReadReport:
    from tensorfabric.host.nccl_tests import parse_nccl_tests

    return parse_nccl_tests(text, source="paste").read


def _counters(text: str | bytes) -> ReadReport:
    from tensorfabric.telemetry.sources.base import SourceContext
    from tensorfabric.telemetry.sources.generic import GenericBudget
    from tensorfabric.telemetry.sources.paste import read_counters

    ctx = SourceContext()
    return read_counters(text, name="file:paste", ctx=ctx, budget=GenericBudget(ctx.counters, "file:paste"))[1]


# One line each reader recognises, in the shape the tool prints it.
READERS: dict[str, tuple[Callable[[str | bytes], ReadReport], str]] = {
    "nccl-log": (_nccl, "gpu-a02:5512:5590 [3] NCCL INFO Channel 00/0 : 3[3] -> 11[3] [send] via NET/IB/1/GDRDMA"),
    "ucx-log": (_ucx, "[1668430312.877316] [cn-0412:90211:0]      ucp_worker.c:1784 UCX  INFO    0x1f3ac90 "
                      "inter-node cfg#2tag(rc_mlx5/mlx5_1:1) rma(rc_mlx5/mlx5_1:1)"),
    "gid-table": (_gids, "mlx5_0  1       3       0000:0000:0000:0000:0000:ffff:c0a8:0101 192.168.1.1     v2      "
                         "ens1f0np0"),
    "nccl-tests": (_nccl_tests, "    16777216       4194304     float     sum      -1    177.6   94.45  165.29    "
                                "N/A    181.3   92.54  161.95    N/A"),
    "counters": (_counters, "     rx_prio3_pause: 1042"),
}
PROSE = ("We upgraded the cluster last week and since then the job is slow.\n"
         "Here is the only line I kept from the output:\n\n{line}\n\nAny idea? Thanks!\n")


@pytest.mark.parametrize("kind", sorted(READERS))
def test_one_recognised_line_in_prose_is_read_and_the_rest_reported(kind: str) -> None:
    read, line = READERS[kind]
    report = read(PROSE.format(line=line))
    assert report.used >= 1, report.summary()
    assert report.total == 6 and report.used + report.skipped + len(report.not_understood) <= 4
    assert report.summary().startswith(("read paste as ", "read file:paste as "))


@pytest.mark.parametrize("kind", sorted(READERS))
@pytest.mark.parametrize("data", [b"\x00\x01\x02\x03binary\x00", b"", b"\n \n\t\n"], ids=["binary", "empty", "blank"])
def test_binary_and_empty_input_are_one_line_parse_errors(kind: str, data: bytes) -> None:
    read, _ = READERS[kind]
    with pytest.raises(ParseError) as info:
        read(data)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kind", sorted(READERS))
def test_prose_alone_is_refused_naming_what_was_expected_and_the_first_line(kind: str) -> None:
    read, _ = READERS[kind]
    with pytest.raises(ParseError) as info:
        read(PROSE.format(line="(nothing pasted)"))
    message = str(info.value)
    assert "\n" not in message and "We upgraded the cluster" in message


@pytest.mark.parametrize("option", ["--nccl-log", "--ucx-log", "--gids", "--nccl-tests"])
def test_doctor_refuses_a_binary_file_in_one_line(option: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 64)
    sysfs = Path(__file__).resolve().parent / "fixtures" / "sysfs" / "mlx5-roce"
    assert main(["doctor", "--sysfs-root", str(sysfs), option, str(blob)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "blob.bin" in err[0] and "not text" in err[0]
