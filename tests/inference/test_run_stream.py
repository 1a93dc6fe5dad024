"""``run`` on a terminal: tokens appear while they are generated, and Ctrl-C keeps them (exit 130).

The run is a real ``python -m tensorfabric run`` on a pseudo-terminal (``pty``): the only way to see output
arrive before a process ends, and the way a user's Ctrl-C arrives (the terminal's INTR character, a SIGINT to
the whole foreground process group, ranks included). Two Gloo ranks, so the tokens cross from rank 0 to the
launcher as they do in every multi-rank run.
"""

from __future__ import annotations

import os
import pty
import select
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tensorfabric.cli.main import main

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pty and process groups as on Linux")

DEADLINE_S = 120.0


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("stream") / "tiny"
    assert main(["model", "make-tiny", str(directory), "--layers", "2", "--hidden", "64", "--heads", "4",
                 "--kv-heads", "2", "--vocab", "512"]) == 0
    return directory


class Terminal:
    """A child process on a pty: what it printed so far, Ctrl-C, and its exit code."""

    def __init__(self, argv: list[str]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "RANK", "WORLD_SIZE", "MASTER_"))}
        env.update({"COLUMNS": "120", "TERM": "xterm", "PYTHONUNBUFFERED": "1"})
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover -- the child
            os.execve(sys.executable, [sys.executable, "-m", "tensorfabric", *argv], env)
        self.output = b""
        self.code: int | None = None

    def chunks(self, until: float) -> Iterator[bytes]:
        while time.monotonic() < until:
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not data:
                return
            self.output += data
            yield data

    def wait_for(self, needle: bytes, until: float) -> bool:
        return needle in self.output or any(needle in self.output for _ in self.chunks(until))

    def finish(self, until: float) -> int:
        for _ in self.chunks(until):
            pass
        while self.code is None and time.monotonic() < until:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
            else:
                time.sleep(0.05)
        if self.code is None:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
            pytest.fail(f"the run did not end; it printed: {self.output[-2000:]!r}")
        os.close(self.fd)
        return self.code

    def text(self) -> str:
        return self.output.decode("utf-8", "replace").replace("\r\n", "\n")


def _argv(tiny: Path, tokens: int) -> list[str]:
    return ["run", "--model", str(tiny), "--tp", "2", "--prompt", "The", "--max-new-tokens", str(tokens),
            "--ignore-eos", "--no-warmup", "--timeout", "100s"]


def _streamed(output: bytes) -> bool:
    """Some generated text is on screen: 'generated[0]: ' and at least one character after it."""
    head, sep, rest = output.partition(b"generated[0]: ")
    return bool(sep) and bool(rest.strip())


def test_tokens_stream_and_ctrl_c_prints_the_text_so_far_and_exits_130(tiny: Path) -> None:
    """Text appears while the ranks generate (the run is stopped long before its 2000 tokens, so it cannot
    have come from the report); Ctrl-C then keeps it, says how far it got and exits 130, without a traceback."""
    term = Terminal(_argv(tiny, 2000))
    until = time.monotonic() + DEADLINE_S
    for _ in term.chunks(until):
        if len(term.output.partition(b"generated[0]: ")[2]) > 20:
            break
    assert _streamed(term.output), term.output[-2000:]
    seen = term.text().split("generated[0]: ", 1)[1]
    assert "tokens/s" not in seen and "interrupted" not in seen
    os.write(term.fd, b"\x03")  # the terminal's INTR character: SIGINT to the foreground process group
    code = term.finish(until)
    text = term.text()
    assert code == 130, text[-2000:]
    assert text.index("model: ") < text.index("generated[0]: ")
    assert text.split("generated[0]: ", 1)[1].startswith(seen)
    assert "(interrupted after " in text and "tokens/s" not in text
    count = int(text.split("(interrupted after ", 1)[1].split(" ", 1)[0])
    assert 0 < count < 2000
    assert "Traceback" not in text


class _Bytes:
    """A byte-level tokenizer stand-in: token id = byte."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return bytes(ids).decode("utf-8", "replace")


def test_live_stream_holds_back_a_split_character_and_is_not_repeated() -> None:
    import io

    from tensorfabric.cli._stream import TokenStream

    out = io.StringIO()
    stream = TokenStream(_Bytes(), 1, out, live=True)
    for token in b"Paris " + "é".encode() + b"\x07":
        stream.add([token])
        if token == "é".encode()[0]:
            assert not out.getvalue().endswith("\ufffd")  # half a character is not shown
    stream.finish()
    assert out.getvalue() == "generated[0]: Paris é\\x07\n" and stream.shown


def test_interrupted_without_a_terminal_prints_every_prompt_so_far(capsys: pytest.CaptureFixture[str]) -> None:
    """Piped output (or a batch) is not streamed; Ctrl-C still prints what each prompt generated."""
    from tensorfabric.cli.run import _generate_streaming
    from tensorfabric.inference.runner import RunConfig

    cfg = RunConfig(model_dir="unused", prompts=("a", "b"))

    def launch(on_message: object) -> dict[int, object]:
        assert callable(on_message)
        on_message(0, [ord("h"), ord("x")])
        on_message(0, [ord("i"), None])
        raise KeyboardInterrupt

    import tensorfabric.inference.tokenizer as tokenizer

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokenizer, "load_tokenizer", lambda directory: _Bytes())
        with pytest.raises(KeyboardInterrupt):
            _generate_streaming(cfg, Path("unused"), True, launch)  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "generated[0] (interrupted after 2 tokens): hi" in out
    assert "generated[1] (interrupted after 1 tokens): x" in out


def test_an_empty_live_answer_still_gets_its_line() -> None:
    import io

    from tensorfabric.cli._stream import TokenStream

    out = io.StringIO()
    stream = TokenStream(_Bytes(), 1, out, live=True)
    stream.finish()
    assert out.getvalue() == "generated[0]: \n" and stream.shown
