"""Each NCCL rule is written once (``host.nccl_rules``): the doctor and ``fabric lint`` emit the same id, severity
and fix for the same value. One test per rule, each running the two real adapters -- the doctor's check on the
captured mlx5 host, the lint rule on the reference spec's host -- and comparing the findings themselves."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tensorfabric.fabric.lint import RULES as LINT_RULES
from tensorfabric.fabric.lint import lint_context
from tensorfabric.fabric.lint.view import LintContext, build_context
from tensorfabric.fabric.spec import load_spec
from tensorfabric.findings import Finding
from tensorfabric.host.discovery import discover
from tensorfabric.host.doctor import run_doctor
from tensorfabric.host.nccl_rules import GID_INDEX_PINNED, HCA_PREFIX, RULES, TC_NOT_LOSSLESS, NcclRule
from tensorfabric.host.ncclenv import derive_env

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HOST = FIXTURES / "sysfs" / "mlx5-roce"
SPEC = FIXTURES / "fabric" / "specs" / "reference.yaml"


def _lint(rule: NcclRule, var: str, value: str) -> list[Finding]:
    ctx = build_context(load_spec(SPEC))
    name, dev = next((n, d) for n, d in ctx.devices.items() if d.kind == "host")
    devices = {**ctx.devices, name: dataclasses.replace(dev, nccl_env={**dev.nccl_env, var: value})}
    changed: LintContext = dataclasses.replace(ctx, devices=devices)
    assert changed.plan.roce.dscp == (26,)  # the doctor judges against its default DSCP 26
    return [f for f in lint_context(changed, only=[rule.id]) if f.rule == rule.id]


def _doctor(rule: NcclRule, var: str, value: str | None) -> list[Finding]:
    inv = discover(HOST)
    env = derive_env(inv, environ={}).as_dict()
    env = {k: v for k, v in env.items() if k != var} | ({var: value} if value is not None else {})
    return [f for f in run_doctor(inv, environ=env).findings if f.rule == rule.id]


def _same(doctor: list[Finding], lint: list[Finding], rule: NcclRule) -> None:
    assert len(doctor) == 1 and len(lint) == 1, (doctor, lint)
    assert (doctor[0].rule, doctor[0].severity, doctor[0].fix) == (lint[0].rule, lint[0].severity, lint[0].fix)
    assert doctor[0].severity == rule.severity


def test_every_nccl_rule_is_registered_once_with_its_severity() -> None:
    for rule in RULES:
        info = LINT_RULES.get(rule.id)
        assert (info.severity, info.checklist, info.summary) == (rule.severity, rule.checklist, rule.summary)


@pytest.mark.parametrize("value", ["0", "96", "abc", '"106"'])
def test_tc_not_lossless(value: str) -> None:
    _same(_doctor(TC_NOT_LOSSLESS, "NCCL_IB_TC", value), _lint(TC_NOT_LOSSLESS, "NCCL_IB_TC", value),
          TC_NOT_LOSSLESS)
    assert not _doctor(TC_NOT_LOSSLESS, "NCCL_IB_TC", "0x6a") and not _lint(TC_NOT_LOSSLESS, "NCCL_IB_TC", "0x6a")


def test_gid_index_pinned() -> None:
    doctor = _doctor(GID_INDEX_PINNED, "NCCL_IB_GID_INDEX", "3")
    lint = _lint(GID_INDEX_PINNED, "NCCL_IB_GID_INDEX", "3")
    _same(doctor, lint, GID_INDEX_PINNED)
    assert "valid now" in doctor[0].message and "valid now" not in lint[0].message  # the doctor checked the table
    assert not _doctor(GID_INDEX_PINNED, "NCCL_IB_GID_INDEX", "-1")
    assert not _lint(GID_INDEX_PINNED, "NCCL_IB_GID_INDEX", "-1")


@pytest.mark.parametrize("value", ["mlx5_0,mlx5_1", "mlx5_0:1", "^mlx5_1"])
def test_hca_prefix_match(value: str) -> None:
    _same(_doctor(HCA_PREFIX, "NCCL_IB_HCA", value), _lint(HCA_PREFIX, "NCCL_IB_HCA", value), HCA_PREFIX)
    assert not _doctor(HCA_PREFIX, "NCCL_IB_HCA", "=mlx5_0:1") and not _lint(HCA_PREFIX, "NCCL_IB_HCA", "=mlx5_0:1")


def test_hca_prefix_confirmed_by_the_host_is_an_error() -> None:
    """Only the doctor sees devices: a prefix that really selects mlx5_10 is raised to the rule's confirmed level."""
    found = HCA_PREFIX.finding("x", "m", {}, "f", confirmed=True)
    assert found.severity == HCA_PREFIX.confirmed == "error"
