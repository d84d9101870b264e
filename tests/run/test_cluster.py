"""`gccl label --scheduler`: a local Dask cluster of two worker processes (CPU backend).

A cluster run must write the same files and the same summary.csv (but for the
seconds column) as a local run, also when a worker is killed mid-job.
"""

from __future__ import annotations

import csv
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_helpers import (
    WAIT_SECONDS,
    assert_interrupted_summary,
    files,
    gccl,
    json_lines,
    make_fax,
    make_inputs,
    on_first_outputs,
    stopped_by_sigterm,
)

from ccl_cli.config import Settings, apply
from ccl_cli.errors import EXIT_TERMINATED, UsageError
from ccl_cli.run import cluster

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[Any]:
    """A local cluster of two single-threaded worker processes, each under a nanny."""
    with distributed.LocalCluster(
        processes=True, n_workers=2, threads_per_worker=1, dashboard_address=":0"
    ) as local:
        yield local


@pytest.mark.slow
def test_same_outputs_and_summary_as_a_local_run(
    local_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    address = local_cluster.scheduler_address
    monkeypatch.chdir(tmp_path)  # relative paths: the workers' cwd is elsewhere
    make_inputs(Path("in"), 9, 24)
    Path("in/corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    Path("in/text.tif").write_text("not an image")
    args = ["in", "in/missing.png", "--recursive", "--min-area", "2", "--preview", "--json"]
    code, local_stdout, _ = gccl(*args, "--out", "local")
    assert code == 1
    code, cluster_stdout, _ = gccl(*args, "--out", "dask", "--scheduler", address)
    assert code == 1
    assert files(Path("dask")) == files(Path("local"))
    assert json_lines(cluster_stdout) == json_lines(local_stdout, moved=("local", "dask"))
    with open("dask/summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["path"] for row in rows][-1] == "in/missing.png"
    failed = {row["path"] for row in rows if row["status"] == "failed"}
    assert failed == {"in/corrupt.png", "in/text.tif", "in/missing.png"}
    assert sum(row["status"] == "ok" for row in rows) == 9


@pytest.mark.slow
def test_the_pages_of_a_multi_page_tiff_keep_their_page_on_the_cluster(
    local_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    make_fax(Path("fax.tif"), 5)
    code, _, stderr = gccl("fax.tif", "--out", "local")
    assert code == 0, stderr
    code, _, stderr = gccl(
        "fax.tif", "--out", "dask", "--scheduler", local_cluster.scheduler_address
    )
    assert code == 0, stderr
    assert files(Path("dask")) == files(Path("local"))


def test_volume_files_are_one_input_each_on_the_cluster(
    local_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(3)
    Path("in").mkdir()
    for i in range(3):
        np.save(f"in/v{i}.npy", (rng.random((7, 12, 15)) < 0.3).astype(np.uint8))
    mask = np.zeros((10, 10), np.uint8)
    mask[2:5, 2:5] = 1
    np.save("in/image.npy", mask)
    args = ["in", "--preview", "--spacing", "1,1,2", "--json"]
    code, local_stdout, stderr = gccl(*args, "--out", "local")
    assert code == 0, stderr
    code, cluster_stdout, stderr = gccl(
        *args, "--out", "dask", "--scheduler", local_cluster.scheduler_address
    )
    assert code == 0, stderr
    assert files(Path("dask")) == files(Path("local"))
    assert json_lines(cluster_stdout) == json_lines(local_stdout, moved=("local", "dask"))
    assert {record["depth"] for record in json_lines(cluster_stdout).values()} == {7, None}


def one_task_per_input(folder: Path, out: Path, address: str) -> tuple[int, str, str]:
    """A cluster run long enough (48 tasks) to act on while it goes."""
    options = ["-r", "--batch-size", "1", "--workers", "1", "--scheduler", address]
    return gccl(str(folder), "--out", str(out), *options)


@pytest.mark.slow
def test_a_worker_killed_mid_job_still_ends_in_a_complete_identical_output_set(
    local_cluster: Any, tmp_path: Path
):
    make_inputs(tmp_path / "in", 48, 320)
    out = tmp_path / "dask"
    victim = next(iter(local_cluster.workers.values())).process.pid
    killer, seen = on_first_outputs(out, lambda: os.kill(victim, signal.SIGKILL))
    code, _, stderr = one_task_per_input(tmp_path / "in", out, local_cluster.scheduler_address)
    killer.join(WAIT_SECONDS)
    assert code == 0, stderr
    assert seen and seen[0] < 48  # the kill came before the job was done
    code, _, _ = gccl(str(tmp_path / "in"), "-r", "--out", str(tmp_path / "local"))
    assert code == 0
    assert files(out) == files(tmp_path / "local")
    assert not [path for path in out.rglob("*") if ".gccl-tmp-" in path.name]
    # The nanny restarts the killed worker, so later tests have two again.
    local_cluster.wait_for_workers(2, timeout=WAIT_SECONDS)


@pytest.mark.slow
def test_sigterm_cancels_the_rest_and_writes_the_summary(local_cluster: Any, tmp_path: Path):
    make_inputs(tmp_path / "in", 48, 320)
    address = local_cluster.scheduler_address
    options = ["-r", "--batch-size", "1", "--workers", "1", "--scheduler", address]
    code, stderr = stopped_by_sigterm(tmp_path / "in", tmp_path / "dask", *options)
    assert code == EXIT_TERMINATED, stderr
    assert_interrupted_summary(tmp_path / "in", tmp_path / "dask", 48)


def test_a_scheduler_that_does_not_answer_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", 1.0)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    make_inputs(tmp_path / "in", 1, 8)
    code, _, stderr = gccl(
        str(tmp_path / "in"),
        "--out",
        str(tmp_path / "out"),
        "--scheduler",
        f"tcp://127.0.0.1:{port}",
    )
    assert code == 2
    assert f"--scheduler tcp://127.0.0.1:{port}: no Dask scheduler answered within 1 s" in stderr
    assert not (tmp_path / "out" / "summary.csv").exists()


def test_without_distributed_the_extra_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    make_inputs(tmp_path / "in", 1, 8)
    code, _, stderr = gccl(
        str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--scheduler", "tcp://127.0.0.1:8786"
    )
    assert code == 2
    assert "pip install 'gccl[cluster]'" in stderr


@pytest.mark.parametrize(
    "address", ["tcp://10.0.0.5:8786", "10.0.0.5:8786", "tcp://h.example:1", "tcp://[::1]:8786"]
)
def test_scheduler_addresses_are_accepted(address: str):
    assert apply(Settings(), {"scheduler": address}, "f.yaml").scheduler == address


@pytest.mark.parametrize(
    "address", ["", "tcp://a b:1", 8786, "tcp://h:1/path", "tcp://h", "ucx://h:1", "tls://h:1"]
)
def test_bad_scheduler_values_name_the_key(address: object):
    with pytest.raises(UsageError, match="'scheduler' must be a Dask scheduler address"):
        apply(Settings(), {"scheduler": address}, "f.yaml")
