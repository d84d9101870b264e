"""Which thread runs each step of a run in this process (run/local.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.config import Settings
from ccl_cli.io.inputs import InputItem
from ccl_cli.io.made import MadeFiles
from ccl_cli.io.out_dir import OutDir
from ccl_cli.io.output_paths import output_paths
from ccl_cli.run import local
from ccl_cli.run.records import Record


class _Quiet:
    def start(self, total: int | None) -> None:
        pass

    def finished(self, record: Record) -> None:
        pass

    def notice(self, message: str) -> None:
        pass


@pytest.mark.parametrize(("workers", "in_this_thread"), [(1, True), (2, False)])
def test_with_one_worker_thread_large_images_are_read_and_written_in_the_runs_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, in_this_thread: bool
) -> None:
    """Images above INLINE_BYTES go to the pool, unless the run has one thread."""
    threads: list[threading.Thread] = []

    def recording(step: Any) -> Any:
        def run(*args: Any) -> Any:
            threads.append(threading.current_thread())
            return step(*args)

        return run

    monkeypatch.setattr(local, "_read", recording(local._read))
    monkeypatch.setattr(local, "_write", recording(local._write))
    noise = np.random.default_rng(5).random((300, 400)) < 0.5
    assert noise.nbytes > local.INLINE_BYTES
    names = [f"{i}.png" for i in range(3)]
    for name in names:
        Image.fromarray((noise * 255).astype(np.uint8)).save(tmp_path / name)
    out = tmp_path / "out"
    admitted = [
        (Record(InputItem(tmp_path / name, Path(name))), output_paths(out, Path(name)))
        for name in names
    ]
    settings = Settings(out=out, device="cpu", workers=workers)
    with OutDir.open(out) as folder:
        made = MadeFiles(folder)
        local.label_admitted(admitted, settings, CpuBackend(workers), _Quiet(), folder, made)
        made.close()
    assert [record.status for record, _ in admitted] == ["ok"] * 3
    assert len(threads) == 6  # three reads, three writes
    later = threads[1:]  # the first input is always read in the run's thread
    assert all(thread is threading.current_thread() for thread in later) is in_this_thread
