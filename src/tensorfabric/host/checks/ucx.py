"""What a UCX/NIXL log says about its data path (``--ucx-log``): RDMA, or a shared-memory/TCP fallback, and
whether the log can prove anything at all. With ``--require-rdma`` a log that does not prove RDMA is an error."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.findings import Finding, Severity
from tensorfabric.host.checks.base import DoctorContext, register
from tensorfabric.host.ucx_report import CAPTURE_HINT, UcxLogReport

_MLX5 = frozenset({"rc_mlx5", "dc_mlx5", "ud_mlx5", "gga_mlx5"})


def _severity(ctx: DoctorContext, *, default: Severity) -> Severity:
    return "error" if ctx.require_rdma else default


@register("ucx")
def ucx(ctx: DoctorContext) -> Iterator[Finding]:
    report = ctx.ucx_log
    if report is None:
        return
    subject = f"ucx log {report.source}"
    nics = [f"{p.device}:{p.port}" for p in ctx.inventory.ports]
    evidence = {**report.to_dict(), "host_rdma_ports": nics}
    verdict = report.verdict
    lanes = ", ".join(report.transport.lanes)
    if verdict in ("tcp", "shm"):
        yield _fallback(ctx, report, subject, evidence, nics)
    elif verdict == "self-only":
        yield Finding("ucx.self-only", _severity(ctx, default="warning"), subject,
                      "every endpoint in the log is UCX's loopback to its own worker (self): no traffic to another "
                      "process, so the log is no proof of any transport", evidence,
                      f"capture after the peers connect (first transfer) with {CAPTURE_HINT}")
    elif verdict == "no-lanes":
        yield Finding("ucx.no-lanes", _severity(ctx, default="warning"), subject,
                      "the log has UCX lines but no endpoint lane line or protocol table: the transport is unknown",
                      evidence, f"rerun with {CAPTURE_HINT} (info level prints one lane line per endpoint) and "
                      "capture past the first transfer")
    elif verdict == "unknown":
        yield Finding("ucx.transport-unknown", _severity(ctx, default="warning"), subject,
                      f"the data lanes ({lanes}) are neither verbs, TCP nor shared memory: not classified",
                      evidence, "check UCX_TLS; for a GPU path the lanes should include rc_mlx5/rc_verbs")
    if verdict in ("rdma", "tcp") and not report.inter_node:
        yield Finding("ucx.no-inter-node", "warning", subject,
                      f"every endpoint is {'/'.join(s for s in report.scopes if s != 'self')}: the peers ran on one "
                      "host, so the log says nothing about the network", evidence,
                      f"capture a run across two hosts with {CAPTURE_HINT}")
    names = set(report.transports)
    if "rc_verbs" in names and not names & _MLX5:
        yield Finding("ucx.rc-verbs", "info", subject,
                      "UCX used rc_verbs, not rc_mlx5: RDMA works, but the accelerated mlx5 transport (direct "
                      "doorbells, lower latency) is not in use", evidence,
                      "on an mlx5 NIC check `ucx_info -d | grep rc_mlx5` (UCX built with mlx5 support, rdma-core's "
                      "mlx5 provider) and that UCX_TLS does not name rc_verbs only")


def _fallback(ctx: DoctorContext, report: UcxLogReport, subject: str, evidence: dict[str, object],
              nics: list[str]) -> Finding:
    shm = report.verdict == "shm"
    where = (f"this host has RDMA port(s) {', '.join(nics)}" if nics
             else "this host has no RDMA device, so nothing else was possible here")
    what = ("shared memory (" + ", ".join(report.transports) + "): the peers ran on one host, so the log proves "
            "nothing about the network") if shm else f"TCP ({', '.join(report.transport.lanes)}), not RDMA"
    fix = (f"run the peers on two hosts and capture with {CAPTURE_HINT}" if shm else
           "check UCX_TLS/UCX_NET_DEVICES (they must allow rc_mlx5/rc and name the RDMA port, e.g. mlx5_0:1), "
           "`ucx_info -d` inside the container, and /dev/infiniband; set UCX_TLS=rc,sm,self to fail loudly")
    return Finding(f"ucx.{report.verdict}-data-path", _severity(ctx, default="warning" if nics else "info"),
                   subject, f"UCX moved data over {what}; {where}", evidence, fix)
