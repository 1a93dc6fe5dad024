"""Text as users paste it, for every reader of logs, tables, configs and counter dumps.

:func:`normalise` takes off what collectors, terminals and chat tools wrapped around the lines (prompts, timestamps,
Ray/kubectl/pdsh/srun/mpirun/torchrun prefixes, JSON-line records, ANSI colours, Markdown) and records it; readers
walk the resulting :class:`Line` records, split them into :class:`Section` blocks where a paste holds several
commands or hosts, and keep a :class:`Tally` that becomes the :class:`ReadReport` they return beside their facts.
"""

from __future__ import annotations

from tensorfabric.intake.decode import decode
from tensorfabric.intake.report import ReadReport, Tally
from tensorfabric.intake.text import MAX_LINE_CHARS, Line, LineKind, Section, Text, normalise

__all__ = ["MAX_LINE_CHARS", "Line", "LineKind", "ReadReport", "Section", "Tally", "Text", "decode", "normalise"]
