"""One rank of :func:`tensorfabric.lab.launch.run_lab` (the lab target of the one launcher):
``python -m tensorfabric.lab.rank JOB_DIR`` in a lab host.

Reads ``JOB_DIR/job.pkl`` (``(fn, args)``, pickled by the launcher; when ``fn`` is the launching script's own,
``JOB_DIR/main.path`` names that script, which is run first as this process's main module, as multiprocessing's
spawn does), runs ``fn(RANK, *args)`` with the torchrun
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
    if (job / "main.path").exists():
        _import_main((job / "main.path").read_text())
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


def _import_main(path: str) -> None:
    """Run the launching script under the name ``__mp_main__`` (so its ``if __name__ == "__main__"`` block does
    not run) and make it ``__main__``, where pickle looks its functions up."""
    import runpy
    import types

    sys.path.insert(0, os.path.dirname(path))
    module = types.ModuleType("__mp_main__")
    module.__dict__.update(runpy.run_path(path, run_name="__mp_main__"))
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
