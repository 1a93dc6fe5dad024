"""Suite-wide settings: a derandomised Hypothesis profile for CI and a clean NCCL/Gloo environment."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, max_examples=200, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

_LEAKY_PREFIXES = ("NCCL_", "GLOO_", "TENSORFABRIC_")
# torchrun's rendezvous variables: a suite started under a launcher must not make tests think they are a rank
_LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                  "GROUP_RANK", "TORCHELASTIC_RUN_ID")


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see the developer's NCCL/Gloo settings or a surrounding torchrun's rank variables."""
    for name in list(os.environ):
        if name.startswith(_LEAKY_PREFIXES) or name in _LAUNCHER_VARS:
            monkeypatch.delenv(name, raising=False)
