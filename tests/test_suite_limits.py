"""The test suite's own limit: a test that hangs fails alone after the per-test timeout of
pyproject.toml (pytest-timeout), and the run goes on to the next test."""

from __future__ import annotations

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
