from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorfabric import units
from tensorfabric.errors import InputError


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8", 8), ("512B", 512), ("4K", 4096), ("4KiB", 4096), ("4KB", 4000), ("128M", 128 * 2**20),
     ("16MiB", 16 * 2**20), ("1GB", 10**9), ("1g", 2**30), (" 2 KiB ", 2048), ("1.5K", 1536)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert units.parse_size(text) == expected


@pytest.mark.parametrize("text", ["0", "1Q", "", "-4K", "abc", "1.3B", "nan", "inf", "4 K B"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(InputError) as info:
        units.parse_size(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize(
    ("text", "bps"),
    [("400G", 400e9), ("100gbit", 100e9), ("25Gbps", 25e9), ("1gbit", 1e9), ("200mbit", 200e6),
     ("9600bps", 9600.0), ("10kbit", 1e4)],
)
def test_parse_rate(text: str, bps: float) -> None:
    assert units.parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize("text", ["1zbit", "400Q", "-1G", "0", "fast"])
def test_parse_rate_rejects(text: str) -> None:
    with pytest.raises(InputError, match="rate"):
        units.parse_rate(text)


@pytest.mark.parametrize("value", ["400", " 400 ", "9600", 400, 4e11, "1e9"])
def test_rate_without_unit_is_refused_with_the_accepted_forms(value: object) -> None:
    with pytest.raises(InputError) as info:
        units.parse_rate(value, what="speed")  # type: ignore[arg-type]
    text = str(info.value)
    assert text.startswith(f"speed: {value!r} has no unit")
    assert "'400G'" in text and "gbit" in text


@pytest.mark.parametrize("value", ["5", "300", 5, 2.5])
def test_length_without_unit_is_refused_with_the_accepted_forms(value: object) -> None:
    with pytest.raises(InputError) as info:
        units.parse_length(value, what="cable")  # type: ignore[arg-type]
    assert f"cable: {value!r} has no unit" in str(info.value)
    assert "'5m'" in str(info.value) and "km" in str(info.value)


def test_sizes_and_durations_keep_their_base_unit() -> None:
    # Bytes and seconds are the documented base units (nccl-tests' ``-b 8``); only rates and lengths need one.
    assert units.parse_size("8") == 8
    assert units.parse_duration("2") == 2.0


def test_durations_and_lengths() -> None:
    assert units.parse_duration("200ms") == pytest.approx(0.2)
    assert units.parse_duration("5us") == pytest.approx(5e-6)
    assert units.parse_duration("10min") == 600
    assert units.parse_length("5m") == 5
    assert units.parse_length("2km") == 2000
    with pytest.raises(InputError, match="positive length"):
        units.parse_length("-5m")
    with pytest.raises(InputError, match="unknown unit"):
        units.parse_duration("2m")


def test_formatting() -> None:
    assert units.format_size(128 * 2**20) == "128MiB"
    assert units.format_size(1536) == "1.50KiB"
    assert units.format_rate(400e9) == "400Gbit/s"
    assert units.format_duration(350e-6) == "350us"
    assert units.format_duration(1.2) == "1.20s"


@given(st.text(max_size=30))
def test_parsers_raise_only_input_error(text: str) -> None:
    for parse in (units.parse_size, units.parse_rate, units.parse_duration, units.parse_length):
        try:
            parse(text)
        except InputError:
            pass


@given(st.integers(min_value=1, max_value=2**50))
def test_size_roundtrip_bytes(n: int) -> None:
    assert units.parse_size(str(n)) == n


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_rejected(value: float) -> None:
    for parse in (units.parse_size, units.parse_rate, units.parse_duration, units.parse_length):
        with pytest.raises(InputError, match="not finite"):
            parse(value)


@pytest.mark.parametrize("argv", [
    ["simulate", "incast", "--rate", "40"],
    ["lab", "up", "--hosts", "2", "--rate", "1"],
    ["fabric", "init", "--speed", "400"],
    ["fabric", "headroom", "--speed", "400", "--cable", "5m"],
    ["fabric", "headroom", "--speed", "400G", "--cable", "5"],
])
def test_every_verb_refuses_a_rate_or_length_without_unit(capsys: pytest.CaptureFixture[str],
                                                          argv: list[str]) -> None:
    from tensorfabric.cli.main import main

    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and "has no unit (a unit is never guessed)" in err and err.count("\n") == 1


def test_lab_short_form_needs_a_unit() -> None:
    from tensorfabric.lab.spec import parse_short_spec

    assert parse_short_spec("2x1gbit") == (2, 1e9)
    with pytest.raises(InputError, match="has no unit"):
        parse_short_spec("2x1")
