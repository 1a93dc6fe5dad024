"""The one YAML loader: nesting depth and size capped as YAML errors with a line, roots refused in domain words,
and every YAML-reading option (monitor --links, simulate sweep SPEC, --fabric) exits 2 in one line on a nested
file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tensorfabric import yamlload
from tensorfabric.cli.main import main
from tensorfabric.errors import InputError
from tensorfabric.yamlload import MAX_DEPTH, TooDeep, TooLarge, load_yaml, read_yaml

SYSFS = Path(__file__).resolve().parent / "fixtures" / "sysfs" / "mlx5-roce"

DEEP = {
    "flow lists": "[" * 20000,
    "flow mappings": "{a: " * 5000,
    "block mappings": "".join(" " * i + "a:\n" for i in range(3000)),
    "block lists": "".join(" " * (2 * i) + "-\n" for i in range(3000)),
    # a merge key sends the document to PyYAML's own construction, which recurses per level
    "past the quick path": "base: &b {x: 1}\nuse:\n  <<: *b\n" + "".join(" " * (i + 2) + "k:\n" for i in range(500)),
}


@pytest.mark.parametrize("text", DEEP.values(), ids=DEEP.keys())
def test_nesting_past_the_cap_is_a_yaml_error_with_a_line(text: str) -> None:
    with pytest.raises(TooDeep, match=f"nested deeper than {MAX_DEPTH} levels") as caught:
        load_yaml(text)
    assert isinstance(caught.value, yaml.YAMLError) and caught.value.problem_mark is not None


def test_nesting_up_to_the_cap_loads_as_safe_load_does() -> None:
    text = "[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH
    assert load_yaml(text) == yaml.safe_load(text)
    merged = "base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\n"
    assert load_yaml(merged) == yaml.safe_load(merged) == {"base": {"x": 1, "y": 2}, "use": {"x": 1, "y": 3}}


def test_text_over_the_size_cap_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlload, "MAX_CHARS", 10)
    with pytest.raises(TooLarge, match="at most 10"):
        load_yaml("a: 1\nb: 2\nc: 3\n")


@pytest.mark.parametrize(("text", "holds"), [
    ("- a\n- b\n", "holds a list"), ("just words\n", "holds a single string"), ("", "holds nothing"),
    ("a: [1\n", "not valid YAML"), ("{a: " * 200, "nested deeper than"),
])
def test_read_yaml_refuses_in_one_line_naming_the_option_and_the_form(tmp_path: Path, text: str, holds: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        read_yaml(str(path), "--thing", root=dict, example="a mapping such as 'a: 1'")
    message = str(caught.value)
    assert message.startswith(f"--thing {str(path)!r}: ") and holds in message
    assert message.endswith("give a mapping such as 'a: 1'") and "\n" not in message


@pytest.mark.parametrize("text", [DEEP["flow lists"], DEEP["block mappings"]], ids=["flow", "block"])
def test_deep_links_file_sweep_spec_and_fabric_spec_exit_2_in_one_line(tmp_path: Path, text: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text(text)
    for argv, option in ((["monitor", "--once", "--links", str(deep), "--source", f"sysfs:{SYSFS}"], "--links"),
                         (["simulate", "sweep", str(deep)], "sweep spec"),
                         (["fabric", "lint", "--fabric", str(deep)], "malformed YAML")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and option in err[0] and f"nested deeper than {MAX_DEPTH} levels" in err[0], err


def test_a_sweep_spec_that_is_a_list_says_what_a_spec_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text("- kmin: 50KB\n")
    assert main(["simulate", "sweep", str(spec)]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds a list" in err and "'parameters'" in err and len(err.splitlines()) == 1
