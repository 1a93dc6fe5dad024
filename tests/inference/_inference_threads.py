"""One intra-op thread for in-process model runs: with 2 cores shared by many processes, torch's spinning
worker threads make tiny matmuls 50x slower. Restored afterwards so other suites keep their setting."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
