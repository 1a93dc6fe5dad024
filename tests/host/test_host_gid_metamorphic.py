"""Every GID fixture, wrapped as collectors, terminals and chat tools hand it over (one envelope or two, prose and
headings mixed in, a tenth of the other lines deleted), gives the same recommended index per node and port.

Nodes are compared by their order in the paste, not by name: an envelope that names a host (pdsh, kubectl, a
prompt) names the paste's one node, which the bare fixture leaves unnamed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from metamorphic import ENVELOPES, Mutation, apply_all, mutations
from tensorfabric.host.gid_capture import GidCapture, parse_gid_capture, recommended_index

from .conftest import FIXTURES

FILES = sorted((FIXTURES / "gids").glob("*.txt"))

# What a deletion must spare: the lines that carry GIDs, their types and netdev-bearing rows (the brief's "fe80",
# "::ffff", "GID", widened to full-form IPv4-mapped GIDs), and the lines that name a device, port or host for them.
_KEPT = ("GID", "gid", "fe80", ":ffff:", "RoCE", "hca_id", "port:", "Port ", "CA '", "Infiniband device", "==>",
         "physical_state", "ibv_devinfo", "show_gids", "/sys/class/infiniband", "DEV", "n_gids_found")


def protect(line: str) -> bool:
    return any(word in line for word in _KEPT)


Verdict = list[tuple[list[tuple[str, int, int | None]], bool]]


def verdict(capture: GidCapture) -> Verdict:
    """Per node, in paste order: each port's recommended index, and whether the node's table was empty."""
    nodes: dict[str, list[tuple[str, int, int | None]]] = {node: [] for node in capture.nodes}
    for port in capture:
        nodes[port.node].append((port.device, port.port, recommended_index(port)))
    return [(sorted(ports), node in capture.empty) for node, ports in nodes.items()]


def _same(path: Path, mutate: Callable[[str], str]) -> None:
    text = path.read_text()
    assert verdict(parse_gid_capture(mutate(text), source=path.name)) == verdict(parse_gid_capture(text))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutate=mutations(protect=protect))
def test_the_verdict_survives_envelopes_prose_and_deletions(path: Path, mutate: Mutation) -> None:
    _same(path, mutate)


@pytest.mark.parametrize("name", sorted(ENVELOPES))
def test_every_envelope_on_every_fixture(name: str) -> None:
    for path in FILES:
        _same(path, lambda text: apply_all(text, [name]))
