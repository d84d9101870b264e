#!/usr/bin/env python3
"""Streaming latency: `gccl label -` fed paths at a steady rate, and `gccl watch` fed files.

stdin: gccl runs as `gccl label - --out OUT --json -q [options]`; one path is
written to its standard input every 1/--rate seconds for --seconds seconds.
Each path's latency is the time from writing its line (flushed) to reading
its JSON line on gccl's standard output. The paths are hard links (distinct
names, no extra disk) to --distinct generated images.

watch: gccl runs as `gccl watch IN --out OUT --json -q [options]`; every
1/--rate seconds one image is written into IN, either in place (`--watch-write
close`: created, written, closed) or under a temporary name and renamed in
(`--watch-write rename`). The latency is the time from the close (or the
rename) to its JSON line. Inputs are deleted once labeled unless
--keep-inputs, so long runs do not fill the disk.

Before the clock starts, --warmup images go through and are waited for (they
are not counted), so start-up is left out; the time gccl took to print its
first JSON line is reported apart. The resident memory (RSS) of gccl and its
child processes is sampled every --rss-interval seconds. The images are
generated (numpy) and written with OpenCV into a temporary folder: depth
maps (16-bit, planes with noise and holes of 0, for --tau) or binary images
(8-bit random blobs). Results go to stdout and, as JSON, to --json.

    python3 benchmarks/bench_streaming.py --rate 200 --seconds 60 --json stream.json
    python3 benchmarks/bench_streaming.py --modes watch --watch-write rename --rate 50
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OPTIONS = {"depth": "--tau 20 --min-area 50", "binary": ""}


def make_images(kind: str, count: int, width: int, height: int, folder: Path) -> list[bytes]:
    """`count` PNG images of `kind` (written to `folder` too); returns their bytes."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    encoded = []
    y, x = np.mgrid[0:height, 0:width]
    for i in range(count):
        if kind == "depth":
            image = np.full((height, width), 3000.0)
            for _ in range(6):  # planes at different depths over rectangles
                x0, y0 = rng.integers(0, width), rng.integers(0, height)
                w, h = rng.integers(width // 8, width // 2), rng.integers(height // 8, height // 2)
                inside = (x >= x0) & (x < x0 + w) & (y >= y0) & (y < y0 + h)
                plane = rng.uniform(500, 4000) + rng.uniform(-2, 2) * x + rng.uniform(-2, 2) * y
                image[inside] = plane[inside]
            image += rng.normal(0, 3, image.shape)
            image[rng.random(image.shape) < 0.02] = 0  # holes: no reading
            array = np.clip(image, 0, 65535).astype(np.uint16)
        else:
            noise = cv2.GaussianBlur(rng.random((height, width)), (0, 0), 3)
            array = ((noise > np.quantile(noise, 0.6)) * 255).astype(np.uint8)
        ok, data = cv2.imencode(".png", array)
        assert ok
        (folder / f"source-{i:03}.png").write_bytes(data.tobytes())
        encoded.append(data.tobytes())
    return encoded


class Reader(threading.Thread):
    """Reads gccl's JSON lines as they come, stamping each with its arrival time."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.arrived: dict[str, tuple[float, dict[str, Any]]] = {}
        self.condition = threading.Condition()

    def run(self) -> None:
        for line in self.stream:
            now = time.perf_counter()
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            with self.condition:
                self.arrived[Path(record["path"]).name] = (now, record)
                self.condition.notify_all()

    def wait_for(self, names: list[str], timeout: float) -> bool:
        """Whether every one of `names` arrived within `timeout` seconds."""
        deadline = time.perf_counter() + timeout
        with self.condition:
            while not all(name in self.arrived for name in names):
                left = deadline - time.perf_counter()
                if left <= 0:
                    return False
                self.condition.wait(left)
        return True


class MemorySampler(threading.Thread):
    """RSS of a process and its descendants (Linux /proc), every `interval` seconds."""

    def __init__(self, pid: int, interval: float, started: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.started = pid, interval, started
        self.samples: list[tuple[float, float]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            total = sum(_rss_kib(pid) for pid in _tree(self.pid))
            if total:
                self.samples.append((time.perf_counter() - self.started, total / 1024))


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants (from /proc/PID/task/*/children)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo += [int(child) for child in task.read_text().split()]
    return found


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def summarize(latencies: list[float]) -> dict[str, float]:
    """Median, 90th and 99th percentile and maximum of `latencies`, in milliseconds."""
    if not latencies:
        return {}
    ms = np.array(latencies) * 1000
    return {
        "median": float(np.median(ms)),
        "p90": float(np.percentile(ms, 90)),
        "p99": float(np.percentile(ms, 99)),
        "max": float(ms.max()),
        "mean": float(ms.mean()),
    }


def paced(count: int, rate: float, started: float) -> Any:
    """Yield i = 0..count-1, each at started + i / rate (at once when behind)."""
    for i in range(count):
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        yield i


def run_stdin(args: argparse.Namespace, gccl: list[str], work: Path, images: Path) -> dict:
    """The stdin mode (module docstring)."""
    sources = sorted(images.glob("source-*.png"))
    total = args.warmup + int(args.rate * args.seconds)
    inputs = work / "stdin-in"
    inputs.mkdir()
    for i in range(total):
        os.link(sources[i % len(sources)], inputs / f"{i:06}.png")
    out = work / "stdin-out"
    command = [*gccl, "label", "-", "--out", str(out), "--json", "-q", *args.option_list]
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert process.stdin is not None
    reader = Reader(process.stdout)
    reader.start()
    memory = MemorySampler(process.pid, args.rss_interval, started)
    memory.start()
    sent: dict[str, float] = {}

    def send(i: int) -> None:
        name = f"{i:06}.png"
        sent[name] = time.perf_counter()
        assert process.stdin is not None
        process.stdin.write(f"{inputs / name}\n")
        process.stdin.flush()

    warmup = [f"{i:06}.png" for i in range(args.warmup)]
    for i in range(args.warmup):
        send(i)
    if not reader.wait_for(warmup, args.timeout):
        process.kill()
        raise SystemExit(f"warm-up images not labeled within {args.timeout} s")
    first = min(reader.arrived[name][0] for name in warmup) - started
    clock = time.perf_counter()
    for i in paced(total - args.warmup, args.rate, clock):
        send(args.warmup + i)
    sending = time.perf_counter() - clock
    process.stdin.close()
    code = process.wait(timeout=args.timeout)
    exited = time.perf_counter()
    reader.join(5)
    memory.stopped.set()
    return _result(
        "stdin", args, command, sent, reader, warmup, memory, first, sending, code, exited - clock
    )


def run_watch(args: argparse.Namespace, gccl: list[str], work: Path, encoded: list[bytes]) -> dict:
    """The watch mode (module docstring)."""
    folder = work / "watch-in"
    folder.mkdir()
    out = work / "watch-out"
    (folder / "warm-000000.png").write_bytes(encoded[0])  # labeled by the first scan
    command = [*gccl, "watch", str(folder), "--out", str(out), "--json", "-q", *args.option_list]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1)
    reader = Reader(process.stdout)
    reader.start()
    memory = MemorySampler(process.pid, args.rss_interval, started)
    memory.start()
    if not reader.wait_for(["warm-000000.png"], args.timeout):
        process.kill()
        raise SystemExit(f"gccl watch labeled nothing within {args.timeout} s")
    first = reader.arrived["warm-000000.png"][0] - started
    sent: dict[str, float] = {}
    cleaner = threading.Thread(target=_clean, args=(folder, reader, args), daemon=True)
    if not args.keep_inputs:
        cleaner.start()

    def put(name: str, data: bytes) -> None:
        if args.watch_write == "rename":
            temp = folder / f".{name}.part"
            temp.write_bytes(data)
            os.rename(temp, folder / name)
        else:
            with open(folder / name, "wb") as handle:
                handle.write(data)
        sent[name] = time.perf_counter()  # after the close (or the rename)

    warmup = [f"warm-{i + 1:06}.png" for i in range(args.warmup)]
    for name in warmup:
        put(name, encoded[0])
        time.sleep(1 / args.rate)
    if not reader.wait_for(warmup, args.timeout):
        process.kill()
        raise SystemExit(f"warm-up images not labeled within {args.timeout} s")
    names = [f"{i:06}.png" for i in range(int(args.rate * args.seconds))]
    clock = time.perf_counter()
    for i in paced(len(names), args.rate, clock):
        put(names[i], encoded[i % len(encoded)])
    sending = time.perf_counter() - clock
    reader.wait_for(names, args.timeout)
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=args.timeout)
    exited = time.perf_counter()
    reader.join(5)
    memory.stopped.set()
    return _result(
        "watch", args, command, sent, reader, warmup, memory, first, sending, code, exited - clock
    )


def _clean(folder: Path, reader: Reader, args: argparse.Namespace) -> None:
    """Delete the watched folder's inputs once their JSON lines came (long runs)."""
    removed: set[str] = set()
    while True:
        time.sleep(0.5)
        with reader.condition:
            done = [name for name in reader.arrived if name not in removed]
        for name in done:
            (folder / name).unlink(missing_ok=True)
            removed.add(name)


def _result(
    mode: str,
    args: argparse.Namespace,
    command: list[str],
    sent: dict[str, float],
    reader: Reader,
    warmup: list[str],
    memory: MemorySampler,
    first: float,
    sending: float,
    code: int,
    until_exit: float,
) -> dict[str, Any]:
    counted = [name for name in sent if name not in warmup]
    arrived = [name for name in counted if name in reader.arrived]
    latencies = [reader.arrived[name][0] - sent[name] for name in arrived]
    statuses: dict[str, int] = {}
    for name in arrived:
        status = reader.arrived[name][1]["status"]
        statuses[status] = statuses.get(status, 0) + 1
    rss = [mb for _, mb in memory.samples]
    third = max(1, len(rss) // 3)
    return {
        "mode": mode,
        "command": shlex.join(command),
        "rate_per_s": args.rate,
        "seconds": args.seconds,
        "sent": len(counted),
        "received": len(arrived),
        "statuses": statuses,
        "first_json_line_s": first,
        "sending_s": sending,
        "achieved_rate_per_s": len(counted) / sending if sending else None,
        "exit_code": code,
        "exit_after_last_send_s": until_exit - sending,
        "latency_ms": summarize(latencies),
        "rss_mb": {
            "first_third_median": statistics.median(rss[:third]) if rss else None,
            "last_third_median": statistics.median(rss[-third:]) if rss else None,
            "max": max(rss) if rss else None,
            "samples": [[round(t, 3), round(mb, 1)] for t, mb in memory.samples],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default="stdin,watch", help="stdin, watch or both")
    parser.add_argument("--rate", type=float, default=200, help="images per second")
    parser.add_argument("--seconds", type=float, default=10, help="how long the stream runs")
    parser.add_argument("--kind", choices=["depth", "binary"], default="depth")
    parser.add_argument("--size", default="640x480", help="WIDTHxHEIGHT of the images")
    parser.add_argument("--distinct", type=int, default=16, help="different images generated")
    parser.add_argument(
        "--options",
        default=None,
        help="gccl label options, quoted (default: '--tau 20 --min-area 50' for depth maps)",
    )
    parser.add_argument(
        "--gccl",
        default=f"{shlex.quote(sys.executable)} -m ccl_cli",
        help="the gccl command (default: this Python with -m ccl_cli from this checkout)",
    )
    parser.add_argument("--watch-write", choices=["close", "rename"], default="close")
    parser.add_argument("--warmup", type=int, default=5, help="images sent first, not counted")
    parser.add_argument("--rss-interval", type=float, default=0.2, help="seconds between samples")
    parser.add_argument("--timeout", type=float, default=120, help="seconds to wait for gccl")
    parser.add_argument("--keep-inputs", action="store_true", help="watch: keep labeled inputs")
    parser.add_argument("--work", type=Path, help="folder for the files (default: a temporary)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    options = DEFAULT_OPTIONS[args.kind] if args.options is None else args.options
    args.option_list = shlex.split(options)
    width, height = (int(v) for v in args.size.split("x"))
    gccl = shlex.split(args.gccl)
    os.environ["PYTHONPATH"] = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    results = []
    with tempfile.TemporaryDirectory(dir=args.work) as temp:
        work = Path(temp)
        encoded = make_images(args.kind, args.distinct, width, height, work / "images")
        for mode in args.modes.split(","):
            if mode == "stdin":
                result = run_stdin(args, gccl, work, work / "images")
            elif mode == "watch":
                result = run_watch(args, gccl, work, encoded)
            else:
                raise SystemExit(f"unknown mode {mode}")
            result.update(kind=args.kind, size=args.size, options=options)
            results.append(result)
            latency, rss = result["latency_ms"], result["rss_mb"]
            print(
                f"{mode}: {result['received']}/{result['sent']} images at "
                f"{result['achieved_rate_per_s']:.0f}/s; latency median "
                f"{latency.get('median', 0):.1f} ms, p99 {latency.get('p99', 0):.1f} ms, max "
                f"{latency.get('max', 0):.1f} ms; RSS {rss['first_third_median']:.0f} -> "
                f"{rss['last_third_median']:.0f} MB (max {rss['max']:.0f}); first JSON line after "
                f"{result['first_json_line_s']:.2f} s; exit {result['exit_code']} "
                f"{result['exit_after_last_send_s']:.2f} s after the last send; "
                f"statuses {result['statuses']}"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
