"""``tensorfabric lab``: build, inspect, use and remove network-namespace labs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from tensorfabric.cli._common import RATE, console, emit_json
from tensorfabric.cli._options import json_option

if TYPE_CHECKING:
    from rich.console import Console

    from tensorfabric.lab.status import LabStatus

__all__ = ["cli", "render"]

DEFAULT_NAME = "lab"


@click.group("lab")
def cli() -> None:
    """Emulated hosts in network namespaces, linked through switches by rate-shaped veth links (needs root)."""


@cli.command("up")
@click.option("--name", default=DEFAULT_NAME, show_default=True, help="Lab name (lowercase letters, digits).")
@click.option("--hosts", type=int, required=True, help="Number of hosts, 1..64 (checked by the lab spec).")
@click.option("--rate", type=RATE, required=True, help="Host link rate, each direction (e.g. 1gbit, 200mbit).")
@click.option("--topology", type=click.Choice(["star", "leafspine"]), default="star", show_default=True)
@click.option("--leaves", type=int, default=None, help="Leaf switches (leafspine; default 2; checked by the spec).")
@click.option("--spines", type=int, default=None, help="Spine switches (leafspine; default 2; checked by the spec).")
@click.option("--uplink-rate", type=RATE, default=None, help="Leaf-spine link rate (leafspine; default --rate).")
@click.option("--mtu", type=int, default=9000, show_default=True,
              help="MTU of every lab interface, 576..9000 (checked by the lab spec).")
@click.option("--subnet", default="198.18.0.0/15", show_default=True, help="IPv4 network for lab addresses.")
@json_option("Print the lab's status as JSON.")
def up_cmd(name: str, hosts: int, rate: float, topology: str, leaves: int | None, spines: int | None,
           uplink_rate: float | None, mtu: int, subnet: str, as_json: bool) -> int:
    """Build a lab; it stays until `tensorfabric lab down NAME`."""
    from tensorfabric.signals import deferred_signals

    # From here to the printed status a Ctrl-C is acted on at safe points only (see Lab.up), and one that comes
    # after the build but before the status is out removes the lab again: exit 130 means nothing was left.
    with deferred_signals() as pending:
        _up(name, hosts, rate, topology, leaves, spines, uplink_rate, mtu, subnet, as_json, pending.check)
    return 0


def _up(name: str, hosts: int, rate: float, topology: str, leaves: int | None, spines: int | None,
        uplink_rate: float | None, mtu: int, subnet: str, as_json: bool, checkpoint: Callable[[], None]) -> None:
    from tensorfabric.lab import Lab

    lab = Lab(hosts=hosts, rate=rate, name=name, topology=topology, leaves=leaves, spines=spines,
              uplink_rate=uplink_rate, mtu=mtu, subnet=subnet)
    checkpoint()
    lab.up(persistent=True)
    try:
        status = lab.status()
        checkpoint()
        _show(status, as_json)
        checkpoint()
    except BaseException:
        lab.down()
        raise


@cli.command("down")
@click.argument("name", required=False)
@click.option("--all", "all_", is_flag=True, help="Remove every stale lab (tf-* namespaces) instead of one.")
@click.option("--prefix", default="", help="With --all: only labs whose name starts with this.")
@click.option("--force", is_flag=True, help="With --all: also labs held by a running process.")
@json_option("Print {\"removed\": [namespaces]} as JSON.")
def down_cmd(name: str | None, all_: bool, prefix: str, force: bool, as_json: bool) -> int:
    """Remove lab NAME (exactly what its state file records), or with --all every stale lab."""
    from tensorfabric.errors import InputError
    from tensorfabric.lab import down_all, lab_down

    if all_ == (name is not None):
        raise InputError("lab down: give either a lab NAME or --all")
    if prefix and not all_:
        raise InputError("lab down: --prefix only applies with --all")
    removed = down_all(prefix=prefix, include_owned=force) if all_ else lab_down(str(name))
    if as_json:
        emit_json({"removed": list(removed)})
    else:
        click.echo(f"removed {len(removed)} namespace(s)" + (f": {' '.join(removed)}" if removed else ""))
    return 0


@cli.command("exec", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("name")
@click.argument("host")
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def exec_cmd(name: str, host: str, argv: tuple[str, ...]) -> int:
    """Run a command in HOST of lab NAME: `tensorfabric lab exec demo h0 -- ip addr`. Exits with its status."""
    from tensorfabric.lab import Lab

    # click keeps the '--' that separates our arguments from the command's (interspersed args are off).
    command = list(argv[1:] if argv[:1] == ("--",) else argv)
    return Lab.attach(name).exec(host, command, capture=False).returncode


@cli.command("status")
@click.argument("name")
@json_option()
def status_cmd(name: str, as_json: bool) -> int:
    """Hosts, addresses, links, rates and per-link counters of lab NAME."""
    from tensorfabric.lab import Lab

    _show(Lab.attach(name).status(), as_json)
    return 0


@cli.command("list")
@json_option()
def list_cmd(as_json: bool) -> int:
    """Labs recorded in the state directory."""
    from tensorfabric.lab.state import StateStore
    from tensorfabric.lab.status import lab_list

    labs = lab_list(StateStore())
    if as_json:
        sys.stdout.write(labs.to_json())
    else:
        for lab in labs.labs:
            click.echo(f"{lab.name}\t{lab.phase}\t{lab.topology}\t{lab.hosts} hosts")
    return 0


def _show(status: LabStatus, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(status.to_json())
    else:
        render(status, console())


def render(status: LabStatus, con: Console) -> None:
    """The people's form of a lab's status: a line, the hosts table, the links table (one row per direction)."""
    from rich.table import Table

    from tensorfabric.units import format_size

    con.width = max(con.width, 120)  # the links table is wide; never truncate addresses or counters
    con.print(f"lab [bold]{status.name}[/]: {status.topology}, {len(status.hosts)} hosts, "
              f"subnet {status.subnet}, mtu {status.mtu}")
    hosts = Table(title="hosts")
    for col in ("host", "rank", "netns", "interface", "address"):
        hosts.add_column(col)
    for h in status.hosts:
        hosts.add_row(h.name, str(h.rank), h.netns, h.interface, h.address)
    con.print(hosts)
    links = Table(title="links (counters per sending end: tx = leaving that end, qdisc = its tbf)")
    for col in ("from", "to", "rate", "tx bytes", "tx pkts", "drops", "qdisc drops", "overlimits", "backlog"):
        links.add_column(col, justify="left" if col in ("from", "to") else "right")
    for link in status.links:
        for end, peer in (link.ends, link.ends[::-1]):
            if not end.present:
                links.add_row(end.endpoint, peer.endpoint, link.rate, "missing", *[""] * 5)
                continue
            q = end.qdisc
            links.add_row(end.endpoint, peer.endpoint, link.rate, format_size(end.tx_bytes), str(end.tx_packets),
                          str(end.tx_dropped), *(("", "", "") if q is None else
                                                 (str(q.drops), str(q.overlimits), str(q.backlog))))
    con.print(links)
