"""R7: MTUs carry RoCE 4096 frames and agree along every link."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, fixes, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding

MISMATCH = "mtu.mismatch"
TOO_SMALL = "mtu.roce-too-small"
CLASS_TOO_SMALL = "mtu.lossless-class-too-small"
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


@rule(CLASS_TOO_SMALL, "error", "R7", "a switch's lossless class or port MTU is below RoCE MTU 4096 plus headers")
def class_too_small(ctx: LintContext) -> Iterator[Finding]:
    # The switch counts its MTU per NOS as the L3 packet or the L2 frame; 4192 holds a 4096-byte RoCE payload with
    # every header either way, so a value below it drops full-size RoCE frames on whichever NOS it came from.
    for ref in ctx.ports("switch"):
        mtu = ref.port.mtu
        if mtu is None or mtu >= ROCE_4096_NETDEV_MTU or not ref.port.pfc_priorities:
            continue
        yield finding(CLASS_TOO_SMALL, ref.subject, f"MTU {mtu} on a lossless port (priorities "
                      f"{sorted(ref.port.pfc_priorities)}) is below {ROCE_4096_NETDEV_MTU}, RoCE MTU 4096 plus its "
                      "headers: full-size RoCE frames are dropped, and a drop on a lossless class is never retried "
                      "by PFC", {"mtu": mtu, "needed": ROCE_4096_NETDEV_MTU, "source": ref.device.source},
                      fixes.mtu(ref.device.format, ref.port.name if ref.port.name != "*" else "<port>", 9216))
