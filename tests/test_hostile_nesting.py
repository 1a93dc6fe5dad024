"""Deep nesting never reaches "internal error" (issue 29): every CLI option that reads a user's file refuses 200 000
nested ``[`` or ``{"a":`` (as JSON, YAML flow and YAML block) in one line naming the file, exit 2, in well under a
second; and tensorfabric.jsonload, the one JSON loader behind them, caps depth in linear time."""

from __future__ import annotations

import json
import os
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.cli.main import cli, main
from tensorfabric.jsonload import MAX_DEPTH, JsonError, load_json, nesting_exceeds

N = 200_000
BODIES = {
    "json-array": "[" * N + "]" * N + "\n",
    "json-object": '{"a":' * N + "1" + "}" * N + "\n",
    "yaml-flow": "links: " + "[" * N + "]" * N + "\n",
    "yaml-block": "- " * N + "x\n",  # compact nested block sequences: level k starts at column 2k
}

Argv = Callable[[Path, Path], list[str]]  # (file, scratch directory) -> argv


def _doctor(option: str, value: str = "{}") -> Argv:
    return lambda f, d: ["doctor", "--sysfs-root", str(d / "root"), option, value.format(f)]


# Every option that reads a file the user names. A monitor source that fails is reported in the poll's table and
# the verb exits 1 (a failed source, as for a source that is down), so those rows expect 1 and the error in --json.
FILE_OPTIONS: dict[str, tuple[Argv, int]] = {
    "doctor --nccl-log": (_doctor("--nccl-log"), 2),
    "doctor --gids": (_doctor("--gids"), 2),
    "doctor --ucx-log": (_doctor("--ucx-log"), 2),
    "doctor --nccl-tests": (_doctor("--nccl-tests"), 2),
    "doctor --mlnx-qos": (_doctor("--mlnx-qos", "eth0={}"), 2),
    "doctor --fabric": (_doctor("--fabric"), 2),
    "env --fabric": (lambda f, d: ["env", "--sysfs-root", str(d / "root"), "--fabric", str(f)], 2),
    "env --gids": (lambda f, d: ["env", "--sysfs-root", str(d / "root"), "--gids", str(f)], 2),
    "fabric headroom --table": (lambda f, d: ["fabric", "headroom", "--speed", "400G", "--cable", "5m",
                                              "--table", str(f)], 2),
    "fabric headroom --fabric": (lambda f, d: ["fabric", "headroom", "--fabric", str(f)], 2),
    "fabric lint --fabric": (lambda f, d: ["fabric", "lint", "--fabric", str(f)], 2),
    "fabric lint --deployed": (lambda f, d: ["fabric", "lint", "--deployed", str(f)], 2),
    "fabric lint --deployed (AVD)": (lambda f, d: ["fabric", "lint", "--deployed", str(f)], 2),
    "fabric render --fabric": (lambda f, d: ["fabric", "render", "--fabric", str(f), "--out", str(d / "out")], 2),
    "simulate --fabric": (lambda f, d: ["simulate", "incast", "--fabric", str(f)], 2),
    "fleet check": (lambda f, d: ["fleet", "check", str(f)], 2),
    "monitor --links": (lambda f, d: ["monitor", "--links", str(f), "--source", f"replay:{d / 'empty.jsonl'}",
                                      "--once"], 2),
    "monitor --source file": (lambda f, d: ["monitor", "--source", f"file:{f}", "--once"], 2),
    "monitor --source replay": (lambda f, d: ["monitor", "--source", f"replay:{f}", "--once", "--json"], 1),
    "monitor --source rdma-json": (lambda f, d: ["monitor", "--source", f"rdma-json:{f}", "--once", "--json"], 1),
    "monitor --source rdma-file": (lambda f, d: ["monitor", "--source", f"rdma-file:{f}", "--once", "--json"], 1),
    "monitor --source ethtool-file": (lambda f, d: ["monitor", "--source", f"ethtool-file:{f}", "--once", "--json"],
                                      1),
    "model info (config.json)": (lambda f, d: ["model", "info", str(f.parent)], 2),
}
# Options that take a path but no text a user wrote: where each is covered or why it is not here.
NOT_TEXT = {
    "run --model",  # the same config.json reader as `model info` (covered there), behind a torch import
    "model import-gguf FILE",  # a binary GGUF file: refused by its magic number before any parsing
    "model import-gguf DIRECTORY", "model make-tiny DIRECTORY",  # directories the verb writes
}


def _file_options() -> set[str]:
    """Every path-like option of the CLI: click.Path types that are not outputs, and FILE metavars."""
    from tensorfabric.cli._options import _Output

    found: set[str] = set()

    def walk(command: click.Command, path: list[str], ctx: click.Context) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name], click.Context(sub, parent=ctx))
            return
        for param in command.params:
            is_path = isinstance(param.type, click.Path) and not isinstance(param.type, _Output)
            if is_path or "FILE" in str(getattr(param, "metavar", None) or ""):
                label = param.opts[0] if param.opts[0].startswith("-") else str(param.name).upper()
                found.add(" ".join([*path, label]))

    walk(cli, [], click.Context(cli))
    return found


def test_every_file_option_is_in_the_list() -> None:
    covered = {name.split(" (")[0] for name in FILE_OPTIONS} | {"model info DIRECTORY", "fleet check PATHS"}
    missing = _file_options() - covered - NOT_TEXT
    assert not missing, f"file options without a hostile-nesting case: {sorted(missing)}"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    (root / "root" / "sys" / "class" / "net").mkdir(parents=True)
    (root / "empty.jsonl").write_text("")
    return root


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, float]:
    start = time.perf_counter()
    code = main(argv)
    seconds = time.perf_counter() - start
    out, err = capsys.readouterr()
    return code, out, err, seconds


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("option", sorted(FILE_OPTIONS))
def test_deep_nesting_is_refused_in_one_line(option: str, body: str, scratch: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    argv_of, expected = FILE_OPTIONS[option]
    case = scratch / f"{option}-{body}".replace(" ", "_").replace("(", "").replace(")", "")
    case.mkdir()
    suffix = ".avd.yml" if "AVD" in option else ".json" if body.startswith("json") else ".yaml"
    target = case / ("config.json" if option.startswith("model info") else f"deep{suffix}")
    target.write_text(BODIES[body])
    argv = argv_of(target, case)
    code, out, err, seconds = _run(argv, capsys)
    if seconds > 1:  # the first use of a verb imports its modules: time the parse itself on a second run
        code, out, err, seconds = _run(argv, capsys)
    assert code == expected, (code, err, out[-500:])
    assert "Traceback" not in err + out and "internal error" not in err + out
    assert seconds < 1, f"{option} on {body}: {seconds:.2f} s"
    if expected == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and str(target.parent) in lines[0], err
    else:  # a failed monitor source: its error names the file, in the poll's machine output
        errors = json.loads(out)["errors"]
        if errors:
            assert str(target) in json.dumps(errors)
        else:  # a replay source skips text that is no sample line; it must not have made one up
            assert json.loads(out)["samples"] == []


# 900 levels: json.loads parses it (under its ~1000-frame limit) and whatever walks the result recursively breaks,
# or a reader takes it for a document (fleet check took this one for a doctor report and exited 0).
MIDDLE = '{"PORT": {"Ethernet0": {"mtu": ' + "[" * 900 + "]" * 900 + '}}, "schema_version": 1, "hidden_size": 8}\n'


@pytest.mark.parametrize(("option", "said"), [("model info (config.json)", "nested deeper than 64 levels"),
                                              ("fleet check", "line 1: nested deeper than 64 levels"),
                                              ("monitor --source rdma-json", "nested deeper than 64 levels"),
                                              ("fabric lint --deployed", "found nothing a lint rule can check")])
def test_nesting_json_would_take_is_refused_too(option: str, said: str, scratch: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    argv_of, expected = FILE_OPTIONS[option]
    case = scratch / f"middle-{option}".replace(" ", "_").replace("(", "").replace(")", "")
    case.mkdir()
    target = case / ("config.json" if option.startswith("model info") else "config_db.json")
    target.write_text(MIDDLE)
    code, out, err, _ = _run(argv_of(target, case), capsys)
    assert code == expected and said in err + out, (code, err, out[-500:])
    assert "Traceback" not in err + out and "internal error" not in err + out


_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 32,
           "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
           "rms_norm_eps": 1e-5, "max_position_embeddings": 64}


@pytest.mark.parametrize("name", ["model.safetensors", "model.safetensors.index.json"])
def test_a_deep_checkpoint_header_or_index_is_refused(name: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps(_CONFIG))
    deep = ('{"a": ' + "[" * N + "]" * N + "}").encode()
    (tmp_path / name).write_bytes(struct.pack("<Q", len(deep)) + deep if name.endswith("safetensors") else deep)
    code, out, err, seconds = _run(["model", "info", str(tmp_path)], capsys)
    assert code == 2 and seconds < 1, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{tmp_path / name}:1: nested deeper than 64 levels" in lines[0], err


# -- the loader ------------------------------------------------------------------------------------------------------

def _nested(depth: int) -> str:
    return '{"k": [' * depth + "0" + "]}" * depth


def test_the_cap_is_exact_and_brackets_inside_strings_do_not_count() -> None:
    depth = MAX_DEPTH // 2  # each level of _nested is two (an object and a list)
    assert load_json(_nested(depth), what="x", source="s") == json.loads(_nested(depth))
    with pytest.raises(JsonError, match=f"nested deeper than {MAX_DEPTH} levels"):
        load_json("[" + _nested(depth) + "]", what="x", source="s")
    quoted = json.dumps({"a": "[[[{{{" * 100, "b": '\\"[[[' * 100, "c": ["\\"] * 3})
    assert load_json(quoted, what="x", source="s") == json.loads(quoted)
    assert not nesting_exceeds(quoted)


def test_errors_name_source_line_column_and_what_was_expected() -> None:
    with pytest.raises(JsonError) as info:
        load_json('{"PORT": {\n  "Ethernet0": x}}', what="a CONFIG_DB object", source="config_db.json")
    error = info.value
    assert (error.source, error.line, error.lineno, error.colno) == ("config_db.json", 2, 2, 16)
    assert str(error).startswith("config_db.json:2: not valid JSON (Expecting value) at column 16; expected a "
                                 "CONFIG_DB object")
    deep = "\n" * 4 + "[" * N
    with pytest.raises(JsonError, match=r"^trace.jsonl:14: nested deeper than 64 levels at column 65"):
        load_json(deep, what="a sample", source="trace.jsonl", first_line=10)  # unclosed brackets count too
    with pytest.raises(JsonError, match="not UTF-8"):
        load_json(b'{"a": "\xff"}', what="x", source="s")


def test_object_pairs_hook_is_passed_on_and_bytes_are_read() -> None:
    pairs: list[list[tuple[str, Any]]] = []

    def hook(items: list[tuple[str, Any]]) -> dict[str, Any]:
        pairs.append(items)
        return dict(items)

    assert load_json(b'{"a": 1, "a": 2}', what="x", source="s", object_pairs_hook=hook) == {"a": 2}
    assert pairs == [[("a", 1), ("a", 2)]]


def test_a_deep_json_line_is_just_not_a_json_envelope() -> None:
    from tensorfabric.intake import normalise

    line = '{"message": "NCCL INFO x", "extra": ' + "[" * 5000 + "]" * 5000 + "}"
    text = normalise(line + "\n", source="paste", what="an NCCL log")
    assert [ln.text for ln in text.lines if ln.kind == "text"] == [line]


def test_the_scan_is_linear_on_a_long_line() -> None:
    # 3 MB on one line: a depth cap and a parse in a fraction of a second where a quadratic scan would take minutes.
    row = json.dumps({"port": "Ethernet0", "speed": "400000", "d": 'a\\"b[{', "l": [1, [2, [3]]]})
    text = "[" + ",".join([row] * 30_000) + "]"
    start = time.perf_counter()
    assert len(load_json(text, what="x", source="s")) == 30_000
    assert not nesting_exceeds('"' + '\\"' * 1_000_000)  # one unterminated string of escaped quotes
    assert time.perf_counter() - start < 5


@settings(max_examples=25, deadline=None)
@given(st.recursive(st.none() | st.integers() | st.text(alphabet='[]{}"\\ab', max_size=6),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                  max_size=3),
                    max_leaves=40))
def test_the_scan_agrees_with_the_depth_of_the_value(value: Any) -> None:
    def depth(v: Any) -> int:
        if isinstance(v, list):
            return 1 + max(map(depth, v), default=0)
        if isinstance(v, dict):
            return 1 + max(map(depth, v.values()), default=0)
        return 0

    text = json.dumps(value)
    for limit in range(depth(value) + 1):
        assert nesting_exceeds(text, limit) == (depth(value) > limit), (text, limit)


# Issue 29, acceptance: a FIFO with no writer and /dev/zero on every file option exit 2 in under a second. A file
# reader that opened before looking would block on the FIFO for ever (the timeout ends that) or read /dev/zero
# until memory ran out.
@pytest.mark.timeout(60)
@pytest.mark.parametrize("stream", ["fifo", "dev-zero"])
@pytest.mark.parametrize("option", sorted(FILE_OPTIONS))
def test_a_fifo_or_a_device_is_refused_before_it_is_opened(option: str, stream: str, scratch: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv_of, _ = FILE_OPTIONS[option]
    case = scratch / f"stream-{option}-{stream}".replace(" ", "_").replace("(", "").replace(")", "")
    case.mkdir()
    if option.startswith("model info"):
        if stream == "dev-zero":
            pytest.skip("model info takes a directory; its config.json is the FIFO case")
        target = case / "config.json"
        os.mkfifo(target)
    elif stream == "fifo":
        target = case / "pipe"
        os.mkfifo(target)
    else:
        target = Path("/dev/zero")
    argv = argv_of(target, case)
    code, out, err, seconds = _run(argv, capsys)
    if seconds > 1:  # the first use of a verb imports its modules
        code, out, err, seconds = _run(argv, capsys)
    assert code == 2 and seconds < 1, (code, seconds, err, out[-500:])
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err + out, err
