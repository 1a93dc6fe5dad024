"""Acceptance 1: DCQCN incast at 40G with the paper's parameters converges to C/N and the fluid fixed point q*."""

from __future__ import annotations

import pytest

from tensorfabric.errors import InputError
from tensorfabric.sim import EcnConfig, Flow, PaperDcqcn, SimConfig, compile_network, fixed_point, run
from tensorfabric.topology import Endpoint, Fabric, Host, Link, Nic, Port, Switch

RATE = 40e9
SIZES = (2, 4, 8)


def _three_incasts() -> tuple[Fabric, list[Flow]]:
    """Three independent single-switch incasts (N = 2, 4, 8) in one fabric, so one run checks all three."""
    hosts, switches, links, flows = [], [], [], []
    for n in SIZES:
        sw = f"sw{n}"
        names = [f"n{n}r", *(f"n{n}s{i}" for i in range(n))]
        ports = []
        for i, h in enumerate(names):
            hosts.append(Host(h, (Nic("eth0", RATE, rdma_device="mlx5_0"),)))
            ports.append(Port(f"Ethernet{i * 4}", RATE))
            links.append(Link(Endpoint(h, "eth0"), Endpoint(sw, f"Ethernet{i * 4}"), RATE))
        switches.append(Switch(sw, ports=tuple(ports)))
        flows += [Flow(s, names[0], 1e15) for s in names[1:]]
    return Fabric(tuple(hosts), tuple(switches), tuple(links)), flows


def test_fixed_point_matches_the_published_table() -> None:
    # dcqcn-stability.tex exact roots at 40G defaults: N=2 20.2 KB, N=4 41.8 KB, N=8 93.8 KB; N=16 pins at Kmax.
    expected = {1: 11.2e3, 2: 20.2e3, 4: 41.8e3, 8: 93.8e3, 10: 122.6e3}
    for n, q in expected.items():
        fp = fixed_point(n, RATE, PaperDcqcn(), EcnConfig())
        assert fp.queue_bytes == pytest.approx(q, rel=0.01), n
        assert fp.rate_bps == RATE / n
    assert fixed_point(16, RATE, PaperDcqcn(), EcnConfig()).above_kmax
    assert fixed_point(8, 100e9, PaperDcqcn(), EcnConfig()).queue_bytes == pytest.approx(32.7e3, rel=0.01)
    with pytest.raises(InputError):
        fixed_point(0, RATE, PaperDcqcn(), EcnConfig())


def test_incast_converges_to_fair_share_and_fixed_point() -> None:
    fabric, flows = _three_incasts()
    # 4 us moves 20 KB per step at 40G, well inside the 64 KiB limit; the fluid model needs no finer step here.
    # The fluid model counts 1000-byte wire packets: no separate header share (header_bytes=0).
    cfg = SimConfig(step_s=4e-6, duration_s=60e-3, dcqcn="paper", mtu=1000, header_bytes=0, records=300)
    net = compile_network(fabric, flows, cfg)
    trace = run(net, cfg)
    t = trace.series_t
    late = t >= t[-1] * 0.75
    window = t[late][-1] - t[late][0]
    delivered = trace.series_delivered[late]
    start = 0
    for n in SIZES:
        ids = list(range(start, start + n))
        start += n
        rates = (delivered[-1, ids] - delivered[0, ids]) * 8 / window
        assert rates == pytest.approx([RATE / n] * n, rel=0.05), (n, rates)
        edge = int(net.dst_nic_edge[ids[0]])
        queue = float(trace.series_queue[late, edge].mean())
        q_star = fixed_point(n, RATE, PaperDcqcn(), EcnConfig()).queue_bytes
        assert queue == pytest.approx(q_star, rel=0.15), (n, queue, q_star)
    assert trace.dropped.sum() == 0.0
