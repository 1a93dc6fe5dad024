"""``fabric lint`` and the host doctor give the same verdict on the same NCCL variable values.

Both decide through ``host.nccl_judge``; this runs the two real paths (the lint rule on a spec's host record, the
doctor check on the captured mlx5 host) side by side so a rule that drifts from its check fails here.
"""

from __future__ import annotations

import dataclasses

import pytest

from tensorfabric.fabric.lint import lint_context
from tensorfabric.fabric.lint.view import LintContext, build_context
from tensorfabric.fabric.spec import load_spec
from tensorfabric.host.discovery import discover
from tensorfabric.host.doctor import run_doctor
from tensorfabric.host.ncclenv import derive_env

from .fabric_core_paths import FIXTURES, SPECS

HOST = FIXTURES.parent / "sysfs" / "mlx5-roce"


def _lint_fires(rule: str, var: str, value: str) -> bool:
    ctx = build_context(load_spec(SPECS / "reference.yaml"))
    name, dev = next((n, d) for n, d in ctx.devices.items() if d.kind == "host")
    env = {**dev.nccl_env, var: value}
    devices = {**ctx.devices, name: dataclasses.replace(dev, nccl_env=env)}
    changed: LintContext = dataclasses.replace(ctx, devices=devices)
    assert changed.plan.roce.dscp == (26,)  # the doctor below judges against its default DSCP 26
    return any(f.rule == rule for f in lint_context(changed, only=[rule]))


def _doctor_fires(rules: set[str], var: str, value: str) -> bool:
    inv = discover(HOST)
    env = {**derive_env(inv, environ={}).as_dict(), var: value}
    return any(f.rule in rules for f in run_doctor(inv, environ=env).findings)


@pytest.mark.parametrize("value", ["0", "96", "104", "106", "107", "0x6a", "0x60", "abc", "", "-4", "300", " 106"])
def test_ib_tc_same_verdict(value: str) -> None:
    assert _lint_fires("nccl.tc-not-lossless", "NCCL_IB_TC", value) == \
        _doctor_fires({"nccl.tc-not-lossless"}, "NCCL_IB_TC", value)


@pytest.mark.parametrize("value", ["0", "1", "3", "-1", "", "x", "0x3"])
def test_gid_index_same_verdict(value: str) -> None:
    # The doctor, holding the GID table, says more (error vs info); pinned or not is the shared verdict.
    assert _lint_fires("nccl.gid-index-pinned", "NCCL_IB_GID_INDEX", value) == \
        _doctor_fires({"gid.index-env", "nccl.gid-index-pinned"}, "NCCL_IB_GID_INDEX", value)


@pytest.mark.parametrize("value", ["mlx5_0", "mlx5_0,mlx5_1", "^mlx5_1", "=mlx5_0", "^=mlx5_1", "=mlx5_0:1",
                                   "mlx5_1:1"])
def test_ib_hca_prefix_same_verdict(value: str) -> None:
    assert _lint_fires("nccl.hca-prefix-match", "NCCL_IB_HCA", value) == \
        _doctor_fires({"nccl.hca-prefix-match"}, "NCCL_IB_HCA", value)


def test_the_cases_cover_both_verdicts() -> None:
    assert _lint_fires("nccl.tc-not-lossless", "NCCL_IB_TC", "0")
    assert not _lint_fires("nccl.tc-not-lossless", "NCCL_IB_TC", "0x6a")
    assert not _lint_fires("nccl.gid-index-pinned", "NCCL_IB_GID_INDEX", "-1")
    assert _lint_fires("nccl.hca-prefix-match", "NCCL_IB_HCA", "^mlx5_1")
    assert not _lint_fires("nccl.hca-prefix-match", "NCCL_IB_HCA", "=mlx5_0")
    assert _doctor_fires({"nccl.tc-not-lossless"}, "NCCL_IB_TC", "0")
    assert not _doctor_fires({"nccl.tc-not-lossless"}, "NCCL_IB_TC", "0x6a")  # strtoll base 0 reads hex: 106
    assert _doctor_fires({"gid.index-env", "nccl.gid-index-pinned"}, "NCCL_IB_GID_INDEX", "3")
    assert not _doctor_fires({"gid.index-env", "nccl.gid-index-pinned"}, "NCCL_IB_GID_INDEX", "-1")  # NCCL's auto
