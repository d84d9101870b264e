"""Chunked volumes on a Dask LocalCluster: gccl (what `gccl label v.zarr` runs) against
dask-image's ndmeasure.label, and gccl's own one-piece speed.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_chunked.py [--size 384] [--chunk 128]
        [--workers 2] [--repeat 3] [--dask-image] [--large 1024 --memory-limit 1GiB
        --large-repeat 1]
        [--threads] [--device cpu|cuda]

The volume: Gaussian-smoothed noise (sigma 6) above its 82nd percentile, a few hundred blobs,
26-connectivity. On the cluster each engine reads the volume from a Zarr store of chunk^3
chunks (the workers load their chunks; gccl in work blocks of whole chunks, as `gccl label`
reads a Zarr volume) and is timed from the call until its labels are written by the workers
into a Zarr store (gccl: seams solved, statistics table, labels stored as `gccl label` stores
them; dask-image: its lazily numbered labels and count); nothing voxel-sized goes through the
client. Per run: the client's seconds per step and the workers' computing seconds per kind of
task (distributed's task stream). The stored labels are checked against one-piece labeling
afterwards (gccl's bit for bit; dask-image's as the same partition). dask-image runs once
(--dask-image): it takes minutes. --threads: gccl chunked on a da.from_array of the volume in
this process's threads instead (no cluster).

--large N: an N^3 uint8 volume written to a Zarr store in chunk^3 chunks (made chunk by chunk),
labeled from the store into a Zarr store on workers of --memory-limit each (the peak resident
memory of each worker process sampled every 0.2 s), against its read + write floor (the source
read and written as a label store of gccl's dtype, as gccl stores it) and against that floor
plus one-piece ccl_cli.label of the volume in this process (on --device); --large-repeat runs
the chunked job that many times (the median; the last run's task seconds).
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

import ccl_cli


def smooth_blobs(size: int, seed: int = 0) -> np.ndarray:
    import scipy.ndimage as ndi

    rng = np.random.default_rng(seed)
    field = ndi.gaussian_filter(rng.random((size,) * 3, dtype=np.float32), 6)
    return (field > np.quantile(field[::4, ::4, ::4], 0.82)).astype(np.uint8)


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two label arrays cut the volume into the same components (any numbering)."""
    if not np.array_equal(a > 0, b > 0):
        return False
    pairs = np.unique(np.stack([a[a > 0], b[b > 0]]), axis=1)
    return len(np.unique(pairs[0])) == len(np.unique(pairs[1])) == pairs.shape[1]


#: The device each chunk is labeled on (--device): the workers' engine.
DEVICE = ["cpu"]


def zarr_source(path: str) -> Any:
    """The Zarr volume at `path` as `gccl label` reads it: a dask array of work blocks (whole
    chunks, up to WORK_BLOCK_VOXELS each) read on the workers."""
    from ccl_cli.chunked.zarr_store import open_source

    return open_source(Path(path)).dask_array()


def gccl_chunked(
    array: Any, store: str | None = None, chunks: Any = None
) -> tuple[Any, dict[str, float], float]:
    """gccl chunked on `array`: seams solved, the statistics table, and the labels written
    by the workers into a new Zarr store at `store` of `chunks` (the source's) as `gccl label`
    writes them (its dtype, every chunk written; None: computed here, as numpy)."""
    import dask.array as da

    from ccl_cli.chunked.entry import solve_array
    from ccl_cli.chunked.pieces import ChunkLabeler
    from ccl_cli.io.volumes.encode import label_dtype

    options = {"connectivity": 26, "device": DEVICE[0]}
    params = ccl_cli.Labeler(**options).params
    began = time.perf_counter()
    solved = solve_array(array, ChunkLabeler(ccl_cli.label, options), params)
    solved_at = time.perf_counter()
    solved.table()
    table_at = time.perf_counter()
    dtype = label_dtype(solved.count)
    if store is None:
        labels = solved.labels(dtype).compute()
    else:
        labels = label_store(array.shape, chunks, store, dtype)
        da.store(solved.labels(dtype), labels, lock=False)
    seconds = {
        **solved.seconds,
        "table": table_at - solved_at,
        "labels": time.perf_counter() - table_at,
    }
    return labels, seconds, time.perf_counter() - began


def label_store(shape: Any, chunks: Any, store: str, dtype: Any) -> Any:
    """A new Zarr array at `store` of `shape`, `chunks` (one size per axis) and `dtype`, made
    as `gccl label` makes its label stores."""
    from ccl_cli.chunked.zarr_store import Source, create_labels

    shutil.rmtree(store, ignore_errors=True)
    source = Source(Path(store), "", tuple(shape), tuple(chunks), np.dtype(np.uint8), 3)
    return create_labels(source, Path(store), {}, np.dtype(dtype))


def task_seconds(stream: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds of the workers' computing per kind of task (the key's prefix), summed."""
    from dask.utils import key_split

    totals: dict[str, float] = {}
    for task in stream:
        for span in task["startstops"]:
            if span["action"] == "compute":
                name = key_split(task["key"])
                totals[name] = totals.get(name, 0.0) + span["stop"] - span["start"]
    return {name: round(value, 3) for name, value in sorted(totals.items())}


def write_zarr(volume: np.ndarray, path: str, chunk: int) -> Any:
    """`volume` as a Zarr store of chunk^3 chunks at `path`, opened by dask.array.from_zarr
    (as dask-image's users do)."""
    import dask.array as da
    import zarr

    target = zarr.create_array(
        store=path, shape=volume.shape, chunks=(chunk,) * 3, dtype=volume.dtype
    )
    target[...] = volume
    return da.from_zarr(path)


def peak_memory(client: Any, stop: threading.Event, peaks: dict[str, int]) -> None:
    def rss() -> int:
        import psutil

        return int(psutil.Process().memory_info().rss)

    while not stop.is_set():
        try:
            for worker, value in client.run(rss).items():
                peaks[worker] = max(peaks.get(worker, 0), value)
        except Exception:  # a worker restarting
            pass
        stop.wait(0.2)


def large_case(size: int, chunk: int, client: Any, repeat: int) -> None:
    import dask.array as da
    import distributed
    import zarr

    with tempfile.TemporaryDirectory(dir=".") as folder:
        source = Path(folder) / "volume.zarr"
        target = zarr.create_array(
            store=str(source), shape=(size,) * 3, chunks=(chunk,) * 3, dtype=np.uint8
        )

        def block(block_info: Any = None) -> np.ndarray:
            (z, _), (y, _), (x, _) = block_info[None]["array-location"]
            grids = np.ogrid[z : z + chunk, y : y + chunk, x : x + chunk]
            wave = sum(
                np.cos(g.astype(np.float32) * (0.05 + 0.01 * i)) for i, g in enumerate(grids)
            )
            return (wave > 1.2).astype(np.uint8)

        began = time.perf_counter()
        made = da.map_blocks(block, chunks=((chunk,) * (size // chunk),) * 3, dtype=np.uint8)
        da.store(made, target, lock=False)
        print(f"  wrote the {size}^3 source in {time.perf_counter() - began:.1f} s")
        stop, peaks = threading.Event(), {}
        sampler = threading.Thread(target=peak_memory, args=(client, stop, peaks), daemon=True)
        sampler.start()
        runs = []
        for run in range(repeat):
            with distributed.get_task_stream(client) as tasks:
                labels, seconds, total = gccl_chunked(
                    zarr_source(str(source)), str(Path(folder) / f"labels-{run}.zarr"), (chunk,) * 3
                )
            runs.append(total)
            if run < repeat - 1:  # (the last run's store stays for the floor's shape and dtype)
                shutil.rmtree(Path(folder) / f"labels-{run}.zarr")
        total = statistics.median(runs)
        stop.set()
        sampler.join()
        began = time.perf_counter()
        copy = label_store(
            labels.shape, labels.chunks, str(Path(folder) / "copy.zarr"), labels.dtype
        )
        da.store(da.from_zarr(str(source)).astype(labels.dtype), copy, lock=False)
        floor = time.perf_counter() - began
        volume = zarr.open_array(str(source), mode="r")[...]
        began = time.perf_counter()
        ccl_cli.label(volume, connectivity=26, device=DEVICE[0])
        one_piece = time.perf_counter() - began
        del volume
        mib = {w: round(p / 2**20) for w, p in peaks.items()}
        print(
            f"  read + write floor (uint8 in, {labels.dtype} out as gccl writes it): {floor:.1f} s"
        )
        print(f"  ccl_cli.label one piece in this process (labels + stats): {one_piece:.1f} s")
        if repeat > 1:
            print(f"  gccl chunked {size}^3 runs: {', '.join(f'{t:.2f}' for t in runs)} s")
        print(
            f"  gccl chunked {size}^3 (read, label, stats, write): {total:.1f} s "
            f"({total / floor:.1f}x the floor, {total / (floor + one_piece):.1f}x one piece + "
            f"floor); peak worker RSS MiB {sorted(mib.values())}"
        )
        print("    client:", {k: round(v, 3) for k, v in seconds.items()})
        print("    tasks:", task_seconds(tasks.data))


def threads(volume: np.ndarray, expected: np.ndarray, args: Any) -> None:
    """gccl chunked on dask's threads scheduler in this process (no cluster)."""
    import dask
    import dask.array as da

    times, shares = [], []
    with dask.config.set(scheduler="threads", num_workers=args.workers):
        for _ in range(args.repeat):
            labels, seconds, total = gccl_chunked(da.from_array(volume, chunks=args.chunk))
            assert np.array_equal(labels, expected), "gccl chunked differs from one piece"
            times.append(total)
            shares.append(seconds["merge"] / total)
    print(
        f"  gccl chunked in this process's threads: median {statistics.median(times):.3f} s "
        f"(runs {', '.join(f'{t:.3f}' for t in times)}); "
        f"merge task {100 * statistics.median(shares):.0f}%"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=384)
    parser.add_argument("--chunk", type=int, default=128)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dask-image", action="store_true", help="also dask-image, once")
    parser.add_argument("--large", type=int, default=0, help="also an N^3 Zarr volume")
    parser.add_argument("--large-repeat", type=int, default=1, help="runs of the N^3 job")
    parser.add_argument("--memory-limit", default="1GiB")
    parser.add_argument("--threads", action="store_true", help="threads here, no cluster")
    parser.add_argument(
        "--device", default="cpu", help="the chunks' device: cpu or cuda (GPU workers)"
    )
    args = parser.parse_args()
    DEVICE[0] = args.device

    import dask
    import dask.array as da
    import distributed

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(
        f"{time.strftime('%Y-%m-%d')} commit {commit} on {platform.node()} "
        f"({platform.processor() or platform.machine()})"
    )
    volume = smooth_blobs(args.size)
    one_piece = []
    for _ in range(args.repeat):
        began = time.perf_counter()
        expected, tables = ccl_cli.label(volume, connectivity=26, device="cpu")
        one_piece.append(time.perf_counter() - began)
    print(
        f"{args.size}^3 smooth blobs, 26-conn, {len(tables[0])} components, "
        f"{args.chunk}^3 chunks, {args.workers} workers"
    )
    print(
        f"  ccl_cli.label one piece (labels + stats): median {statistics.median(one_piece):.3f} s"
    )
    if args.threads:  # what `gccl label` does without --scheduler
        threads(volume, expected, args)
        return
    with (
        distributed.LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=args.memory_limit if args.large else "auto",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
        dask.config.set(scheduler=client),
    ):
        folder = tempfile.TemporaryDirectory(dir=".")
        array = write_zarr(volume, str(Path(folder.name) / "volume.zarr"), args.chunk)
        source = zarr_source(str(Path(folder.name) / "volume.zarr"))
        out = str(Path(folder.name) / "labels.zarr")
        times, shares = [], []
        for _ in range(args.repeat):
            with distributed.get_task_stream(client) as stream:
                labels, seconds, total = gccl_chunked(source, out, (args.chunk,) * 3)
            assert np.array_equal(labels[...], expected), "gccl chunked differs from one piece"
            times.append(total)
            print("    client:", {k: round(v, 3) for k, v in seconds.items()})
            print("    tasks:", task_seconds(stream.data))
            shares.append(seconds["merge"] / total)
        print(
            f"  gccl chunked (Zarr in, labels + stats, Zarr out): median "
            f"{statistics.median(times):.3f} s (runs {', '.join(f'{t:.3f}' for t in times)}); "
            f"merge task {100 * statistics.median(shares):.0f}% of it"
        )
        if args.dask_image:
            import zarr
            from dask_image import ndmeasure

            began = time.perf_counter()
            lazy, count = ndmeasure.label(array, np.ones((3, 3, 3), bool))
            target = zarr.create_array(
                store=out,
                shape=array.shape,
                chunks=(args.chunk,) * 3,
                dtype=lazy.dtype,
                overwrite=True,
            )
            _, n = dask.compute(da.store(lazy, target, lock=False, compute=False), count)
            seconds = time.perf_counter() - began
            print(
                f"  dask-image ndmeasure.label (Zarr in, Zarr out): {seconds:.1f} s, {int(n)} "
                f"components, same partition: {same_partition(target[...], expected)}"
            )
            print(f"  gccl chunked is {seconds / statistics.median(times):.0f}x dask-image")
        folder.cleanup()
        if args.large:
            large_case(args.large, args.chunk, client, args.large_repeat)


if __name__ == "__main__":
    main()
