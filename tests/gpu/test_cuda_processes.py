"""A run on a GPU labels in this process, however many inputs it has (processes.process_count)."""

from __future__ import annotations

from pathlib import Path

from cuda_helpers import gpu
from typer.testing import CliRunner

from ccl_cli.cli import app
from ccl_cli.io.output_paths import GCCL_DIR, RUN_RECORD_NAME

pytestmark = gpu


def _files(out: Path) -> dict[str, bytes]:
    """Every output file but gccl's own folder (the lock, the record of made files), the
    summary (whose seconds differ) and the run record (which names the backend and the times)."""
    return {
        str(path.relative_to(out)): path.read_bytes()
        for path in sorted(out.rglob("*"))
        if path.is_file()
        and path.relative_to(out).parts[0] != GCCL_DIR
        and path.name not in ("summary.csv", RUN_RECORD_NAME)
    }


def _label(inputs: Path, out: Path, *options: str) -> None:
    result = CliRunner().invoke(app, ["label", str(inputs), "--out", str(out), "-q", *options])
    assert result.exit_code == 0, result.output


def test_a_gpu_run_of_many_inputs_writes_what_worker_processes_on_the_cpu_write(tmp_path: Path):
    import numpy as np

    rng = np.random.default_rng(8)
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(24):
        shape = (200 + i % 3, 300 - i % 2)
        np.save(inputs / f"img{i:02}.npy", rng.integers(0, 40, shape).astype(np.uint16))
    options = ["--tau", "3", "--min-area", "4", "--polygons", "--batch-size", "3"]
    _label(inputs, tmp_path / "cpu", "--device", "cpu", "--processes", "3", *options)
    _label(inputs, tmp_path / "gpu", "--device", "cuda", *options)
    want = _files(tmp_path / "cpu")
    assert len(want) == 24 * 3
    assert _files(tmp_path / "gpu") == want
