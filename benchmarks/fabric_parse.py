"""How long every deployed-config parser takes on one hostile 10 MB line, against splitting the same text.

For each parser format and each line shape (one character repeated, quotes, braces, brackets, word soup, long
lists, shell escapes ...) the 10 MB line is spliced into the middle of a real fixture of that format, so the
parser is past its sniffing and inside its grammar when it meets the line. It records, best of 3 runs:

* baseline: ``text.splitlines()`` of the same text (what reading any line-oriented file costs);
* parse: ``parse_text(text, fmt=FORMAT)`` until it returns or raises ParseError/InputError.

Anything else escaping is reported as a failure. The goal (issue 13, acceptance 6) is under 2 s per case.
Usage: ``.venv/bin/python benchmarks/fabric_parse.py``. Writes ``benchmarks/results/fabric_parse.json``.
Timings on a shared 2-core machine are noisy; compare against the baseline of the same run.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path

from tensorfabric.errors import InputError, ParseError
from tensorfabric.fabric.parsers import FORMATS, parse_deployed, parse_text
from tensorfabric.fsutil import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "fabric_parse.json"
FIXTURES = ROOT / "tests" / "fixtures" / "fabric"
SIZE = 10 * 1024 * 1024
SHAPES: dict[str, str] = {
    "letters": "a" * SIZE,
    "digits": "1" * SIZE,
    "spaces": " " * SIZE + "x",
    "quotes": '"' * SIZE,
    "single-quotes": "'a' " * (SIZE // 4),
    "backslashes": "\\ " * (SIZE // 2),
    "braces": "{" * SIZE,
    "brackets": "x [ " + "a " * (SIZE // 2),
    "json-nesting": "[" * SIZE,
    "words": "nv set qos " * (SIZE // 11),
    "comma-list": "1," * (SIZE // 2),
    "port-ranges": "swp1-4," * (SIZE // 7),
    "key-value": "traffic.cos_0.priority_source.dscp = [" + "0," * (SIZE // 2) + "]",
}
REPEATS = 3


def _fixtures() -> dict[str, str]:
    out: dict[str, str] = {}
    for folder in (FIXTURES / "deployed", FIXTURES / "dialects"):
        for path in sorted(folder.iterdir()):
            try:
                out.setdefault(parse_deployed(path).format, path.read_text())
            except ParseError:
                continue
    return out


def _best(fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _parse(text: str, fmt: str) -> str:
    try:
        parse_text(text, source="huge", fmt=fmt)
    except (ParseError, InputError):
        return "ParseError"
    return "parsed"


def main() -> None:
    fixtures = _fixtures()
    rows = []
    failures = []
    for fmt in FORMATS:
        lines = fixtures[fmt].splitlines()
        half = len(lines) // 2
        worst = (0.0, "")
        for shape, line in SHAPES.items():
            text = "\n".join([*lines[:half], line, *lines[half:]])
            baseline = _best(lambda t=text: t.splitlines())  # type: ignore[misc]
            try:
                outcome = _parse(text, fmt)
                seconds = _best(lambda t=text, f=fmt: _parse(t, f))  # type: ignore[misc]
            except Exception as exc:  # noqa: BLE001 - the point is to report anything that escapes
                failures.append(f"{fmt}/{shape}: {type(exc).__name__}: {exc}"[:200])
                continue
            rows.append({"format": fmt, "shape": shape, "outcome": outcome, "parse_s": round(seconds, 4),
                         "splitlines_s": round(baseline, 4)})
            worst = max(worst, (seconds, shape))
        print(f"{fmt:<18} worst {worst[0]:.3f}s ({worst[1]})")
    worst_row = max(rows, key=lambda r: r["parse_s"])
    summary = {"cases": len(rows), "failures": failures, "worst_parse_s": worst_row["parse_s"],
               "worst_case": f"{worst_row['format']}/{worst_row['shape']}", "goal_s": 2.0}
    print(f"{len(rows)} cases, worst {summary['worst_parse_s']}s ({summary['worst_case']}), "
          f"{len(failures)} escaped exceptions")
    atomic_write_text(RESULTS, json.dumps({"benchmark": "fabric_parse", "python": platform.python_version(),
                                           "machine": platform.machine(), "line_bytes": SIZE, "summary": summary,
                                           "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
