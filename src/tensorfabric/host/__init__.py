"""The host doctor: discover RDMA NICs, GIDs and GPU affinity from sysfs, derive the NCCL environment, and
prove from NCCL's own log which transport it really used.

The library never reads ``os.environ``: callers pass the environment mapping (the CLI passes ``os.environ``),
and every filesystem read goes through an injectable root so tests run on captured trees.
"""

from __future__ import annotations
