"""``tensorfabric lab status`` and ``lab list`` as records: ``--json`` byte-identical to what the verbs printed
before, one human renderer; no netns needed (the counters come from a fake netlink)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path

import pytest

from report_inputs import GOLDEN, FakeNetlink, lab_plan
from tensorfabric.cli.lab import _show
from tensorfabric.lab.state import StateStore
from tensorfabric.lab.status import LabStatus, lab_list, lab_status

CASES = [("lab_star", "star", "", ""), ("lab_leafspine", "leafspine", "h1:eth0", "leaf0:p0")]


def _status(topology: str, missing: str, bare: str) -> LabStatus:
    plan = lab_plan(topology)
    return lab_status(plan, FakeNetlink(plan, missing, bare))  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "topology", "missing", "bare"), CASES)
@pytest.mark.parametrize("as_json", [True, False])
def test_status_output_is_what_the_verb_printed_before(name: str, topology: str, missing: str, bare: str,
                                                       as_json: bool) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # the verb's own path: console() on a pipe, or the JSON document
        _show(_status(topology, missing, bare), as_json)
    assert out.getvalue() == (GOLDEN / f"{name}.{'json' if as_json else 'txt'}").read_text()


def test_status_record_reads_as_typed_fields() -> None:
    status = _status("leafspine", "h1:eth0", "leaf0:p0")
    with pytest.raises(dataclasses.FrozenInstanceError):
        status.mtu = 1500  # type: ignore[misc]
    gone = next(end for link in status.links for end in link.ends if end.endpoint == "h1:eth0")
    assert not gone.present and gone.to_dict() == {"endpoint": "h1:eth0", "present": False}
    assert status.tx_bytes() == [link.ends[0].tx_bytes for link in status.links]
    assert status.hosts[2].rank == 2 and status.links[0].rate == "1Gbit/s"
    assert json.loads(status.to_json()) == status.to_dict()


def test_list_json_keys_are_unchanged(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    listing = lab_list(store)
    assert json.loads(listing.to_json()) == {"state_dir": str(store.directory), "labs": []}
