"""Generated text as it is generated: rank 0's tokens on the terminal, and what there was when a run is stopped.

Rank 0 posts each step's tokens to its launcher (:func:`tensorfabric.transfer.launch.post`: over its result pipe
when it is another process, a direct call in process) and the launcher's :meth:`TokenStream.add` decodes and
prints them, so the launcher holds the text even when Ctrl-C stops the ranks before they return anything.
"""

from __future__ import annotations

import threading
from typing import Protocol, TextIO

__all__ = ["TokenStream", "printable"]


class _Decoder(Protocol):
    def decode(self, ids: list[int], skip_special_tokens: bool = ...) -> str: ...


def printable(text: str) -> str:
    """A random model emits arbitrary bytes; control characters must not drive the terminal."""
    return "".join(c if c.isprintable() or c == "\n" else f"\\x{ord(c):02x}" for c in text)


class TokenStream:
    """Collects each prompt's tokens; with ``live`` (one prompt, a terminal) prints the text as it grows."""

    def __init__(self, tokenizer: _Decoder, prompts: int, out: TextIO, *, live: bool) -> None:
        self._tok = tokenizer
        self._out = out
        self.live = live and prompts == 1
        self.ids: list[list[int]] = [[] for _ in range(prompts)]
        self._shown = ""
        self._started = False
        self._lock = threading.Lock()

    def add(self, step: list[int | None]) -> None:
        """One generation step: the new token of each prompt, None for a prompt that already finished."""
        with self._lock:
            for row, token in enumerate(step):
                if token is not None and row < len(self.ids):
                    self.ids[row].append(token)
            if self.live:
                self._show()

    def _show(self) -> None:
        text = self._tok.decode(self.ids[0], skip_special_tokens=True)
        # A multi-byte character split over tokens decodes to U+FFFD until its last byte arrives.
        if text.endswith("\ufffd") or len(text) <= len(self._shown):
            return
        if not self._started:
            self._out.write("generated[0]: ")
            self._started = True
        self._out.write(printable(text[len(self._shown):]))
        self._out.flush()
        self._shown = text

    @property
    def shown(self) -> bool:
        """True when the text is on the terminal: the final report then does not repeat it."""
        return self.live

    def finish(self) -> None:
        """End the live line (an empty answer still gets its line: the report will not repeat it)."""
        with self._lock:
            if self.live:
                self._out.write("\n" if self._started else "generated[0]: \n")
                self._out.flush()

    def partial(self) -> list[str]:
        """The report of an interrupted run: the text of every prompt so far (live text is already on screen)."""
        with self._lock:
            texts = [self._tok.decode(ids, skip_special_tokens=True) for ids in self.ids]
            count = max((len(ids) for ids in self.ids), default=0)
            if self.live:
                return [f"\n(interrupted after {count} tokens)"] if self._started else \
                    ["(interrupted before the first token)"]
            return [f"generated[{i}] (interrupted after {len(self.ids[i])} tokens): {printable(text)}"
                    for i, text in enumerate(texts)]

