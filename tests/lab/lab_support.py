"""What the lab tests share: the one privilege probe that decides whether they can run here."""

from __future__ import annotations

import pytest

from tensorfabric.errors import LabError
from tensorfabric.lab.netlink import check_privileges

try:
    check_privileges()
    _REASON = ""
except LabError as exc:
    _REASON = str(exc)

NEEDS_NAMESPACES = [
    pytest.mark.root,
    pytest.mark.skipif(bool(_REASON), reason=f"lab tests need namespaces: {_REASON}"),
]
