"""Rank bodies for the leak tests: each keeps a scratch directory as the NIXL engine keeps its UCX logs (under the
launcher's ``TENSORFABRIC_SCRATCH`` when there is one) and waits to be stopped. No torch: they start fast."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def keeps_ucx_scratch(rank: int, ready_dir: str) -> int:
    from tensorfabric.fsutil import SCRATCH_ENV, scratch_dir

    scratch_dir("ucx", os.environ.get(SCRATCH_ENV))
    Path(ready_dir, f"rank{rank}.{os.getpid()}").touch()
    time.sleep(600)
    return rank


if __name__ == "__main__":  # a lab host's command: python _leak_workers.py READY_DIR
    keeps_ucx_scratch(int(os.environ.get("RANK", "0")), sys.argv[1])
