"""One rank of :func:`tensorfabric.lab.launch.run_lab` or :func:`~tensorfabric.lab.launch.run_in` (the lab target of
the one launcher): ``python -m tensorfabric.lab.rank JOB_DIR`` in a lab host.

Reads ``JOB_DIR/job.pkl`` (``(fn, args)``, pickled by the launcher), runs ``fn(RANK, *args)`` with the torchrun
environment the lab set, and writes the pickled return value to ``JOB_DIR/rank<RANK>.result`` atomically. A
failure writes ``(class name, one-line message, is InputError)`` to ``JOB_DIR/rank<RANK>.failure`` (the launcher's
one line), prints its traceback on stderr (the detail, with whatever native libraries wrote there) and exits 1.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

from tensorfabric.fsutil import atomic_write_bytes


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tensorfabric.lab.rank JOB_DIR", file=sys.stderr)
        return 2
    job = Path(argv[0])
    fn, args = pickle.loads((job / "job.pkl").read_bytes())
    rank = int(os.environ["RANK"])
    try:
        value = fn(rank, *args)
    except BaseException as exc:
        from tensorfabric.errors import InputError

        failure = (type(exc).__name__, " ".join(str(exc).split())[:2000] or repr(exc), isinstance(exc, InputError))
        atomic_write_bytes(job / f"rank{rank}.failure", pickle.dumps(failure))
        raise
    atomic_write_bytes(job / f"rank{rank}.result", pickle.dumps(value))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
