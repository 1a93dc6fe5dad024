"""Switch CLI output pasted as text, one module per NOS: SONiC, NX-OS, EOS, Junos and Mellanox SDK dumps.

Each module registers its forms in :data:`~tensorfabric.telemetry.sources.textformat.FORMATS`; ``file:`` sniffs and
reads them. Samples carry the switch as host and device (what a prompt names, else the file's stem) and the port,
queue and priority the table prints, under the canonical names the SONiC Redis source uses.
"""
