"""One fact, one home: the NCCL traffic class tensorfabric derives is the same in env, doctor, fabric render, fabric
lint and every page of the docs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tensorfabric import roce
from tensorfabric.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def test_every_doc_page_prints_the_one_nccl_traffic_class() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    told = {(page.name, value) for page in pages
            for value in re.findall(r"export NCCL_IB_TC=(\d+)|NCCL_IB_TC=(\d+) \\\\", page.read_text())}
    values = {v for _, pair in told for v in pair if v}
    assert values <= {str(roce.TRAFFIC_CLASS)}, sorted(told)


def test_env_doctor_and_render_derive_the_same_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sysfs = str(ROOT / "tests" / "fixtures" / "sysfs" / "mlx5-roce")
    assert main(["env", "--sysfs-root", sysfs, "--format", "dotenv"]) == 0
    out = capsys.readouterr().out
    assert f"NCCL_IB_TC={roce.TRAFFIC_CLASS}\n" in out
    assert main(["doctor", "--sysfs-root", sysfs, "--json"]) == 1
    fixes = [f["fix"] for f in json.loads(capsys.readouterr().out)["findings"] if f["rule"] == "nccl.tc-not-lossless"]
    assert fixes and fixes[0].startswith(f"export NCCL_IB_TC={roce.TRAFFIC_CLASS} ")
    assert main(["fabric", "render", "--fabric", str(ROOT / "examples" / "fabric.yaml"), "--out", str(tmp_path)]) == 0
    scripts = "".join(p.read_text() for p in tmp_path.iterdir() if p.suffix == ".sh")
    assert re.findall(r"NCCL_IB_TC=(\d+)", scripts) and set(re.findall(r"NCCL_IB_TC=(\d+)", scripts)) == {
        str(roce.TRAFFIC_CLASS)}
