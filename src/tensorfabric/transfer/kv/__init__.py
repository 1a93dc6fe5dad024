"""KV-cache transfer between the prefill and decode sides of a disaggregated run, over NIXL.

* :mod:`~tensorfabric.transfer.kv.pool` -- the pool's block layout and the write planning (no NIXL);
* :mod:`~tensorfabric.transfer.kv.transfer` -- the writes, their notifications and failure handling;
* :mod:`~tensorfabric.transfer.kv.connect` -- creating the agents, connecting them and the first probe.
"""
