"""The packages build from a fresh clone and the tests pass from the unpacked sdist
(scripts/check_package.py, which also checks the wheel's engine is stripped and the sdist
holds every file the tests need). Slow: it builds both packages and runs tests."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_packages_build_from_a_clone_and_test_from_the_sdist(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked sdist): nothing to clone")
    if importlib.util.find_spec("build") is None:
        pytest.skip("no `build` (pip install build: the dev dependencies)")
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "check_package.py"),
            "--no-isolation",
            "--keep",
            str(tmp_path / "work"),
            "--",
            "tests/native/test_binding.py",
            "tests/test_layout.py",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "the tests pass from the sdist" in done.stdout
