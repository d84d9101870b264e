"""The command's processes skip numba's BLAS probe (scipy.linalg's import); a library
caller's process keeps it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_a_cpu_run_labels_without_importing_scipy_linalg(tmp_path: Path) -> None:
    image = np.zeros((5, 6), np.uint8)
    image[1:3, 1:3] = 255
    image[4, 5] = 255
    Image.fromarray(image).save(tmp_path / "a.png")
    out = tmp_path / "out"
    code = (
        "import sys; from typer.testing import CliRunner; from ccl_cli.cli import app; "
        f"r = CliRunner().invoke(app, ['label', {str(tmp_path / 'a.png')!r}, '--out', "
        f"{str(out)!r}, '--device', 'cpu', '-q']); "
        "print(r.exit_code, 'scipy.linalg' in sys.modules)"
    )
    assert _python(code) == "0 False"
    rows = (out / "a.stats.csv").read_text().splitlines()
    assert [row.split(",")[1] for row in rows[1:]] == ["4", "1"]  # the areas


def test_the_api_leaves_numba_blas_to_the_caller() -> None:
    code = (
        "import numba, numpy as np, ccl_cli; "
        "ccl_cli.label(np.ones((4, 4), np.uint8), device='cpu'); "
        "dot = numba.njit(lambda a, b: np.dot(a, b)); "
        "print(dot(np.ones(3), np.ones(3)))"
    )
    assert _python(code) == "3.0"
