"""The test suite's own limit: a test that hangs fails alone after the per-test timeout of
pyproject.toml (pytest-timeout), and the run goes on to the next test."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_HUNG = """
import threading


def test_hangs():
    threading.Event().wait()


def test_next():
    pass
"""


def test_every_test_has_a_time_limit(pytestconfig: pytest.Config):
    assert float(pytestconfig.getini("timeout")) > 0
    assert pytestconfig.getini("timeout_method") == "signal"  # the test fails, the run goes on


@pytest.mark.slow
def test_a_hung_test_fails_alone_and_the_run_goes_on(tmp_path: Path):
    """The project's settings, but a limit of one second."""
    (tmp_path / "test_hung.py").write_text(_HUNG)
    settings = ["-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), "-o", "timeout=1"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *settings, "test_hung.py"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Timeout" in result.stdout
    assert "FAILED test_hung.py::test_hangs" in result.stdout
    assert "1 failed, 1 passed" in result.stdout


_SKIPS = """
import pytest


@pytest.mark.parametrize("n", range(3))
def test_needs_a_gpu(n):
    pytest.skip("no usable CUDA device")


def test_needs_torch():
    pytest.skip("torch is not installed")


def test_runs():
    pass
"""


@pytest.mark.slow
def test_skips_are_one_line_of_reasons_not_a_line_each(tmp_path: Path):
    """The project's settings and conftest.py: a run without a GPU stays readable."""
    (tmp_path / "test_skips.py").write_text(_SKIPS)
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    settings = ["-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *settings],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SKIPPED" not in result.stdout
    lines = [line for line in result.stdout.splitlines() if line.startswith("skipped ")]
    assert lines == ["skipped 4: 3 no usable CUDA device; 1 torch is not installed"]
