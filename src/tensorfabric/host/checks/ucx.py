"""What a UCX/NIXL log says about its data path (``--ucx-log``): RDMA, or a shared-memory/TCP/GPU-IPC path, or why
no data path came up, judged on the inter-node scope when the log has one. With ``--require-rdma`` a log that does
not prove RDMA is an error."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.findings import Finding, Severity
from tensorfabric.host.checks.base import DoctorContext, register
from tensorfabric.host.ucx_report import CAPTURE_HINT, UcxLogReport, UcxProblem

_MLX5 = frozenset({"rc_mlx5", "dc_mlx5", "ud_mlx5", "gga_mlx5"})


def _severity(ctx: DoctorContext, *, default: Severity) -> Severity:
    return "error" if ctx.require_rdma else default


def _quoted(problem: UcxProblem) -> str:
    return f"line {problem.line}: {problem.message[:160]!r}"


@register("ucx")
def ucx(ctx: DoctorContext) -> Iterator[Finding]:
    report = ctx.ucx_log
    if report is None:
        return
    subject = f"ucx log {report.source}"
    nics = [f"{p.device}:{p.port}" for p in ctx.inventory.ports]
    evidence = {**report.to_dict(), "host_rdma_ports": nics}
    evidence.pop("read", None)
    verdict = report.verdict
    lanes = ", ".join(report.transport.lanes)
    if verdict in ("tcp", "shm"):
        yield _fallback(ctx, report, subject, evidence, nics)
    elif verdict == "gpu-ipc":
        yield Finding("ucx.gpu-ipc-data-path", _severity(ctx, default="info"), subject,
                      f"UCX moved data over GPU IPC ({lanes}): GPU peer copies (NVLink/PCIe) between processes on "
                      "one host or an NVLink fabric, not the RDMA network", evidence,
                      f"to prove the network path, capture peers on two hosts without an NVLink fabric with "
                      f"{CAPTURE_HINT}")
    elif verdict == "self-only":
        yield Finding("ucx.self-only", _severity(ctx, default="warning"), subject,
                      "every endpoint in the log is UCX's loopback to its own worker (self): no traffic to another "
                      "process, so the log is no proof of any transport", evidence,
                      f"capture after the peers connect (first transfer) with {CAPTURE_HINT}")
    elif verdict == "no-data-path":
        yield _no_data_path(report, subject, evidence)
    elif verdict == "no-lanes":
        yield _no_lanes(ctx, report, subject, evidence)
    elif verdict == "unknown":
        yield Finding("ucx.transport-unknown", _severity(ctx, default="warning"), subject,
                      f"the data lanes ({lanes}) are neither verbs, TCP, GPU IPC nor shared memory: not classified",
                      evidence, "check UCX_TLS; for a GPU path the lanes should include rc_mlx5/rc_verbs")
    if verdict in ("rdma", "tcp", "gpu-ipc") and not report.inter_node:
        yield Finding("ucx.no-inter-node", "warning", subject,
                      f"every endpoint is {'/'.join(s for s in report.scopes if s != 'self')}: the peers ran on one "
                      "host, so the log says nothing about the network", evidence,
                      f"capture a run across two hosts with {CAPTURE_HINT}")
    yield from _graded(report, subject, evidence)
    names = set(report.transports)
    if "rc_verbs" in names and not names & _MLX5:
        yield Finding("ucx.rc-verbs", "info", subject,
                      "UCX used rc_verbs, not rc_mlx5: RDMA works, but the accelerated mlx5 transport (direct "
                      "doorbells, lower latency) is not in use", evidence,
                      "on an mlx5 NIC check `ucx_info -d | grep rc_mlx5` (UCX built with mlx5 support, rdma-core's "
                      "mlx5 provider) and that UCX_TLS does not name rc_verbs only")


def _graded(report: UcxLogReport, subject: str, evidence: dict[str, object]) -> Iterator[Finding]:
    """What weakens or qualifies a verdict that stands: an inferred scope, errors beside working endpoints."""
    deciding = report.scope("inter-node") or report.scope("intra-node")
    if deciding is not None and deciding.inferred:
        yield Finding("ucx.scope-inferred", "info", subject,
                      f"this UCX ({report.version or 'version not logged'}) prints endpoint lines without a scope "
                      f"(ep_cfg[N]); {deciding.scope} is inferred from the transports (shared memory or GPU IPC: "
                      "same host; network transports only: another host), not reported by UCX", evidence,
                      "UCX >= 1.14 prints the scope ('inter-node cfg#N'); a newer UCX or a run known to span two "
                      "hosts settles it")
    if report.endpoints and report.errors:
        shown = "; ".join(_quoted(p) for p in report.errors[:3])
        yield Finding("ucx.errors-logged", "warning", subject,
                      f"UCX logged {len(report.errors)} error(s) beside the endpoints it created: {shown}", evidence,
                      report.errors[0].fix)


def _no_data_path(report: UcxLogReport, subject: str, evidence: dict[str, object]) -> Finding:
    first = next((p for p in report.errors if p.kind not in ("error", "nixl-backend-error")), report.errors[0])
    warned = next((p for p in report.problems if p.level == "WARN" and p.kind != "warning"), None)
    before = f"; before that UCX warned that {warned.cause} ({_quoted(warned)})" if warned is not None else ""
    return Finding("ucx.backend-failed", "error", subject,
                   f"UCX never created an endpoint: {first.cause} ({_quoted(first)}){before}; there is no data path "
                   "to classify", evidence, first.fix)


def _no_lanes(ctx: DoctorContext, report: UcxLogReport, subject: str, evidence: dict[str, object]) -> Finding:
    hint = next((p for p in report.problems if p.kind not in ("warning", "error")), None)
    why = f"; UCX warned that {hint.cause} ({_quoted(hint)})" if hint is not None else ""
    fix = (f"{hint.fix}; then " if hint is not None else "") + (
        f"rerun with {CAPTURE_HINT} (info level prints one lane line per endpoint) and capture past the first "
        "transfer")
    return Finding("ucx.no-lanes", _severity(ctx, default="warning"), subject,
                   f"the log has UCX lines but no endpoint lane line or protocol table: the transport is unknown{why}",
                   evidence, fix)


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
