"""What the lab tests share: the one privilege probe that decides whether they can run here."""

from __future__ import annotations

import pytest

from tensorfabric.lab.netlink import privileges_missing

_REASON = privileges_missing() or ""

NEEDS_NAMESPACES = [
    pytest.mark.root,
    pytest.mark.skipif(bool(_REASON), reason=f"lab tests need namespaces: {_REASON}"),
]
