"""What the first call of the CPU engine costs against a steady one, medians in milliseconds.

    .venv/bin/python benchmarks/bench_first_call.py [--processes 7] [--steady 5] [--json OUT]

A command-line run is mostly first calls: each case is labeled in `--processes` fresh
processes, each timing its first call (`ccl_cli.label`, device cpu, once the API is imported
and the input is ready) and then `--steady` calls more; the report gives the median first
call, the median steady call (over every process's steady calls) and their ratio. Cases:
the sample document scan (sample_data/scan_g4.tif, inverted, 8-connectivity), and random
blobs in 256^3 and 384^3 uint8 volumes (26-connectivity, with statistics).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (name, the code that makes `array` and `options` in the child process).
CASES = [
    (
        "scan_g4.tif 2-D",
        "import tifffile\n"
        f"array = tifffile.imread({str(ROOT / 'sample_data' / 'scan_g4.tif')!r})\n"
        "options = dict(invert=True)\n",
    ),
    *[
        (
            f"volume {n}^3 blobs",
            "import numpy as np\n"
            "from scipy import ndimage\n"
            f"noise = np.random.default_rng(1).random(({n}, {n}, {n}), dtype=np.float32)\n"
            "array = (ndimage.uniform_filter(noise, 5) > 0.52).astype(np.uint8)\n"
            "options = dict(connectivity=26)\n",
        )
        for n in (256, 384)
    ],
]

CHILD = """
import json, time
from ccl_cli import label
{make}
times = []
for _ in range({calls}):
    start = time.perf_counter()
    label(array, device="cpu", **options)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def one_process(make: str, steady: int) -> list[float]:
    """The call times of one fresh process: the first, then `steady` more (seconds)."""
    code = CHILD.format(make=make, calls=steady + 1)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=7)
    parser.add_argument("--steady", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    results = []
    for name, make in CASES:
        firsts, steadies = [], []
        for _ in range(args.processes):
            times = one_process(make, args.steady)
            firsts.append(times[0])
            steadies.extend(times[1:])
        first, steady = statistics.median(firsts), statistics.median(steadies)
        results.append({"case": name, "first_ms": 1e3 * first, "steady_ms": 1e3 * steady})
        print(
            f"{name:<20} first {1e3 * first:8.2f} ms  steady {1e3 * steady:8.2f} ms  "
            f"ratio {first / steady:5.2f}  (first calls {min(firsts) * 1e3:.1f}.."
            f"{max(firsts) * 1e3:.1f} ms)",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
