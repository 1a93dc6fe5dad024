"""R7: MTUs carry RoCE 4096 frames and agree along every link."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding

MISMATCH = "mtu.mismatch"
TOO_SMALL = "mtu.roce-too-small"
ROCE_4096_NETDEV_MTU = 4192  # 4096 + 96 B of GRH/UDP/BTH/XRC/AtomicETH/ICRC (include/rdma/ib_addr.h iboe_get_mtu)


@rule(MISMATCH, "error", "R7", "switch MTU below the host's, or the two ends of a switch link differ")
def mismatch(ctx: LintContext) -> Iterator[Finding]:
    for left, right, subject in ctx.pairs():
        a, b = left.port.mtu, right.port.mtu
        if a is None or b is None:
            continue
        kinds = {left.device.kind, right.device.kind}
        if kinds == {"host", "switch"}:
            host, switch = (left, right) if left.device.kind == "host" else (right, left)
            h, s = host.port.mtu or 0, switch.port.mtu or 0
            if s < h:
                yield finding(MISMATCH, subject, f"switch MTU {s} < host MTU {h}; full-size RoCE frames are dropped",
                              {host.endpoint: h, switch.endpoint: s}, f"raise {switch.endpoint} MTU to at least {h}")
        elif a != b:
            yield finding(MISMATCH, subject, f"MTU {a} on {left.endpoint} but {b} on {right.endpoint}",
                          {left.endpoint: a, right.endpoint: b}, "use the same MTU on both ends")


@rule(TOO_SMALL, "error", "R7", "host MTU too small for RoCE MTU 4096")
def too_small(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports("host"):
        mtu = ref.port.mtu
        if mtu is not None and mtu < ROCE_4096_NETDEV_MTU:
            yield finding(TOO_SMALL, ref.subject, f"netdev MTU {mtu} < {ROCE_4096_NETDEV_MTU}: RoCE path MTU falls "
                          "below 4096", {"mtu": mtu}, f"ip link set {ref.port.name} mtu 9000")
