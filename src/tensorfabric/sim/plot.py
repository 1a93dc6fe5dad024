"""One run's picture (``simulate --plot``): the fullest queues, the paused-port count and the DCQCN rates."""

from __future__ import annotations

from tensorfabric.sim.results import SimResult, port_name

__all__ = ["result_png"]


def result_png(result: SimResult) -> bytes:
    """Queue, pause and rate panels over time, as PNG bytes (matplotlib, imported on use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from tensorfabric.fsutil import figure_png

    tr, net = result.trace, result.network
    t_ms = tr.series_t * 1e3
    fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    top = np.argsort(-tr.edge_queue_max)[:4]
    for e in top:
        if tr.edge_queue_max[e] > 0:
            axes[0].plot(t_ms, tr.series_queue[:, e] / 1e3, label=port_name(net, int(e)))
    axes[0].set_ylabel("queue (KB)")
    axes[0].legend(fontsize=7, loc="upper right")
    axes[1].plot(t_ms, tr.series_paused.sum(axis=1), color="tab:red")
    axes[1].set_ylabel("paused ports")
    for f in range(min(8, tr.series_rate.shape[1])):
        axes[2].plot(t_ms, tr.series_rate[:, f] / 1e9, label=f"flow {f}")
    axes[2].set_ylabel("DCQCN rate (Gbit/s)")
    axes[2].set_xlabel("time (ms)")
    axes[2].legend(fontsize=7, loc="upper right", ncol=2)
    fig.suptitle(f"tensorfabric simulate {result.scenario}")
    fig.tight_layout()
    return figure_png(fig, dpi=100)
