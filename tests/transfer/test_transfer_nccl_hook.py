"""The host-doctor hook: derived NCCL env without overwriting the user, log capture, transport policy.

The NCCL logs are real captures kept by the host part under tests/fixtures/nccl_logs.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tensorfabric.errors import InputError, TransferError
from tensorfabric.transfer import nccl

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_logs"


def test_apply_env_never_overwrites_the_user() -> None:
    environ = {"NCCL_IB_HCA": "mlx5_1"}
    applied = nccl.apply_env({"NCCL_IB_HCA": "mlx5_0", "NCCL_IB_GID_INDEX": "3"}, environ)
    assert applied == {"NCCL_IB_GID_INDEX": "3"}
    assert environ == {"NCCL_IB_HCA": "mlx5_1", "NCCL_IB_GID_INDEX": "3"}
    assert nccl.apply_env(None, environ) == {}


def test_capture_log_reads_the_files_nccl_writes(tmp_path: Path) -> None:
    from tensorfabric.fsutil import SCRATCH_ENV

    environ: dict[str, str] = {SCRATCH_ENV: str(tmp_path)}
    capture = nccl.capture_log(environ)
    assert environ["NCCL_DEBUG"] == "INFO" and environ["NCCL_DEBUG_FILE"].endswith(".%h.%p")
    assert capture.path is not None and capture.path.parent.parent == tmp_path  # under the launcher's scratch
    # What NCCL does with %h.%p: one file per process.
    Path(str(capture.path) + ".host1.123").write_text("line one\n")
    assert "line one" in capture.read()
    capture.discard()
    assert not capture.path.parent.exists()
    user = {"NCCL_DEBUG": "WARN"}
    assert nccl.capture_log(user).path is None and user == {"NCCL_DEBUG": "WARN"}


def test_verify_accepts_rdma_and_names_the_transport() -> None:
    text = (LOGS / "roce_gdr_2.21.log").read_text()
    assert nccl.verify(text, "rdma", group="world") == "nccl/roce"


def test_socket_fallback_raises_under_rdma_policy_and_warns_by_default(caplog: pytest.LogCaptureFixture) -> None:
    text = (LOGS / "socket_fallback_no_device.log").read_text()
    with pytest.raises(TransferError, match="'socket'.*NCCL_NET=IB") as info:
        nccl.verify(text, "rdma", group="world")
    assert info.value.op == "init" and info.value.group == "world"
    with caplog.at_level(logging.WARNING, logger="tensorfabric.transfer.nccl"):
        assert nccl.verify(text, "warn", group="world") == "nccl/socket"
    assert "not RDMA" in caplog.text
    assert nccl.verify(text, "any", group="world") == "nccl/socket"
    with pytest.raises(InputError):
        nccl.verify(text, "fast", group="world")


def test_rdma_plugin_counts_as_rdma() -> None:
    text = (LOGS / "plugin_ibext.log").read_text()
    assert nccl.verify(text, "rdma", group="world").startswith("nccl/")


def test_empty_capture_is_unknown_and_refused_only_under_rdma(caplog: pytest.LogCaptureFixture) -> None:
    # The user set NCCL_DEBUG themselves: LogCapture.read() returns "" and nothing proves the transport.
    with caplog.at_level(logging.WARNING, logger="tensorfabric.transfer.nccl"):
        assert nccl.verify("", "warn", group="world") == "nccl/unknown"
        assert nccl.verify("", "any", group="world") == "nccl/unknown"
    with pytest.raises(TransferError, match="cannot prove NCCL uses RDMA"):
        nccl.verify("", "rdma", group="world")
