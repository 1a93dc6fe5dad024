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


def keeps_ucx_scratch_posting(rank: int, ready_dir: str) -> int:
    """:func:`keeps_ucx_scratch`, rank 0 posting a step to its launcher first (as ``run``'s rank 0 streams)."""
    from tensorfabric.transfer.launch import post

    if rank == 0:
        post([1, 2, 3])
    return keeps_ucx_scratch(rank, ready_dir)


if __name__ == "__main__":  # a lab host's command: python _leak_workers.py READY_DIR
    keeps_ucx_scratch(int(os.environ.get("RANK", "0")), sys.argv[1])


FRAME_DUMP = b"".join([
    b"[W1202 00:12:31.118273 4242 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=7, addr=[localhost]:51844,"
    b" remote=[localhost]:29511): failed to recv, got 0 bytes\n",
    b"Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:678 "
    b"(most recent call first):\n",
    *(f"frame #{i}: c10::Error::Error(...) + 0x{0x98 + i:x} (0x7f3a{i:08x} in libc10.so)\n".encode()
      for i in range(17)),
    b"[1764634351.211] [host:4242 :0]     ucp_worker.c:1869 UCX  WARN  failed to connect to peer: Connection reset\n",
])


def native_noise(rank: int, fail: bool) -> int:
    """Write what torch's C++ and UCX write when a peer dies (straight to fd 2, as native code does) and a Python
    warning (through sys.stderr); with ``fail``, rank 0 dies and rank 1 raises as a survivor would."""
    os.write(2, FRAME_DUMP)
    print(f"python-level note from rank {rank}", file=sys.stderr, flush=True)
    if fail and rank == 0:
        os._exit(17)
    if fail:
        time.sleep(0.5)
        raise ConnectionError("peer rank 0 closed the connection during all_reduce")
    return rank
