"""`gccl label` of volume files on the GPU: the same files as on the CPU, through the backend's
one path (CudaBackend.label at rank 3: host_volumes.py), in one piece and in slabs past a
capped device budget, and with --device auto."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cuda_helpers import gpu
from scipy import ndimage
from typer.testing import CliRunner

from ccl_cli.backends.cuda import slabs
from ccl_cli.cli import app

pytestmark = gpu


def run(*args: str) -> int:
    result = CliRunner().invoke(app, ["label", *args, "--quiet"])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code


def files(out: Path) -> dict[str, bytes]:
    skip = ("summary.csv", "gccl-run.json")
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and ".gccl" not in p.parts and p.name not in skip
    }


def volumes(folder: Path) -> None:
    rng = np.random.default_rng(2)
    folder.mkdir()
    np.save(folder / "a.npy", (rng.random((33, 40, 47)) < 0.3).astype(np.uint8))
    np.save(folder / "b.npy", rng.integers(0, 50, (17, 64, 31)).astype(np.uint16))


@pytest.mark.parametrize("options", [[], ["--tau", "3", "--min-area", "4"], ["--open", "1"]])
def test_volume_files_on_cuda_give_the_cpus_bytes(tmp_path, options) -> None:
    volumes(tmp_path / "in")
    for device in ("cpu", "cuda", "auto"):
        out = str(tmp_path / device)
        assert run(str(tmp_path / "in"), "--device", device, "-o", out, *options) == 0
    reference = files(tmp_path / "cpu")
    assert files(tmp_path / "cuda") == reference
    assert files(tmp_path / "auto") == reference
    labels = np.load(tmp_path / "cuda" / "a.labels.npy")
    if not options:
        values = np.load(tmp_path / "in" / "a.npy")
        expected, _ = ndimage.label(values, np.ones((3, 3, 3)))
        assert np.array_equal(labels, expected)


def test_a_volume_past_the_device_budget_goes_in_slabs_from_the_command_line(
    tmp_path, monkeypatch
) -> None:
    volumes(tmp_path / "in")
    assert run(str(tmp_path / "in"), "--device", "cpu", "-o", str(tmp_path / "cpu")) == 0
    monkeypatch.setattr(slabs, "device_budget", lambda device: 3 * 40 * 47 * 16)
    counted: list[int] = []
    label_in_slabs = slabs.label_in_slabs

    def counting(source, params, statistics, plan):
        counted.append(len(plan))
        return label_in_slabs(source, params, statistics, plan)

    monkeypatch.setattr(slabs, "label_in_slabs", counting)
    assert run(str(tmp_path / "in"), "--device", "cuda", "-o", str(tmp_path / "cuda")) == 0
    assert counted and max(counted) > 1
    assert files(tmp_path / "cuda") == files(tmp_path / "cpu")
