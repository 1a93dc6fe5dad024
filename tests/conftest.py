"""Suite-wide settings: a derandomised Hypothesis profile for CI, a clean NCCL/Gloo environment, and which tests
must run alone (the ``serial`` marker)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

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


# `make test` runs the suite in two phases: everything else on two xdist workers, then these one at a time. Their
# assertions are about wall-clock bounds, machine-wide state or real-time servers, which a second worker loading
# the same two cores (or listing the same /tmp, /dev/shm and namespaces) would falsify. Tests marked ``root``
# (network namespaces) are serial too.
SERIAL = {
    "telemetry/test_telemetry_prometheus.py": "a real Prometheus scraping every 3 s; alerts fire and resolve on time",
    "telemetry/test_telemetry_scrape_deadline.py": "scrapes answered within the deadline while a source hangs",
    "telemetry/test_telemetry_exporter_faults.py": "scrape times while sources die",
    "test_cli_signals.py": "signals to process groups; ranks stopped within their bounds",
    "test_cli_leaks.py": "nothing left in /tmp or /dev/shm, which other workers fill meanwhile",
    "transfer/test_transfer_failures.py": "a stopped peer ends the run within --timeout + 2 s",
    "inference/test_inference_disagg.py": "a killed rank ends the disaggregated run within its bound",
    "fleet/test_fleet_online.py": "a hung rank is named within its deadline",
    "inference/test_run_stream.py": "tokens seen on a pty before the run ends",
    "sim/test_sim_sweep.py": "a local Ray cluster and a sweep interrupted mid-run",
    "lab": "network namespaces, listed machine-wide",
}
_TESTS = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    # An xdist worker, or a pytest started in the background by a non-interactive shell, ignores SIGINT, and an
    # ignored signal stays ignored across exec: every process a test starts would shrug off the SIGINT it is sent.
    # Take the default back, so a test sees what a terminal would give it.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN or os.environ.get("PYTEST_XDIST_WORKER"):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        rel = item.path.resolve().relative_to(_TESTS).as_posix()
        if item.get_closest_marker("root") or rel in SERIAL or rel.split("/", 1)[0] in SERIAL:
            item.add_marker(pytest.mark.serial)
