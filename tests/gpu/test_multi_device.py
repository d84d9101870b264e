"""Two or more GPUs: --devices gives the CPU backend's answer (skipped with fewer GPUs)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import cuda_problem, device_count, gpu

from ccl_cli.backends import make_backend
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.multi import MultiDeviceBackend
from ccl_cli.contract.params import LabelParams

pytestmark = [
    *gpu,
    pytest.mark.skipif(
        cuda_problem() is not None or device_count() < 2, reason="fewer than two CUDA devices"
    ),
]


@pytest.mark.parametrize("params", [LabelParams(), LabelParams(tau=3, connectivity=4)])
def test_all_devices_match_the_cpu(params: LabelParams) -> None:
    backend = make_backend("auto", None, lambda message: None, devices="all")
    assert isinstance(backend, MultiDeviceBackend)
    rng = np.random.default_rng(3)
    batch = rng.integers(0, 12, (9, 97, 131)).astype(np.uint16)
    expected = CpuBackend().label(batch, params)
    result = backend.label(batch, params)
    assert np.array_equal(result.labels, expected.labels)
    assert result.components == expected.components
    assert all(a.equals(b) for a, b in zip(result.tables, expected.tables, strict=True))


def test_every_gpu_writes_what_one_gpu_writes(tmp_path) -> None:
    from typer.testing import CliRunner

    from ccl_cli.cli import app

    rng = np.random.default_rng(9)
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(12):
        np.save(inputs / f"img{i:02}.npy", (rng.random((120, 90 + i)) < 0.5).astype(np.uint8))
    outputs = {}
    for name, options in {"one": ["--device", "cuda"], "all": ["--devices", "all"]}.items():
        out = tmp_path / name
        result = CliRunner().invoke(
            app, ["label", str(inputs), "--out", str(out), "-q", "--batch-size", "2", *options]
        )
        assert result.exit_code == 0, result.output
        outputs[name] = {p.name: p.read_bytes() for p in out.glob("*.labels.png")}
    assert len(outputs["one"]) == 12 and outputs["all"] == outputs["one"]
