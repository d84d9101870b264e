"""A long call of the CPU engine stops at Ctrl-C: the main thread polls Python's signals
while the engine runs (native/src/pool.c), and every part of the job stops at its next row.

The calls here point the engine at images and volumes of 2**40 empty rows or planes, which
it would walk for hours: only a stop ends them."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

#: Seconds from SIGINT to the process's exit: the engine polls every 20 ms.
STOP_SECONDS = 2.0
#: Seconds the call runs before the signal (it has started when it says so).
RUNNING_SECONDS = 0.5

IMAGE_JOB = """
    job = gccl_cpu.Batch(
        count=PARTS, height=2**40, width=0, image_type=0, value_type=0, rule=1, connectivity=8,
        tau_mode=TAU, floating=0, min_area=0, label_bytes=4, rule_value=0.0, tau=0.0, relative=0.0,
        quadratic=0.0, image=np.zeros(1, np.uint8), values=np.zeros(1, np.uint8),
    )
    job.prov = np.zeros(1, np.int32)
    job.parent = np.zeros(PARTS, np.int32)
    job.tasks = np.array([(n, 0, 2**40) for n in range(PARTS)], np.int64)
    job.acc_first = np.zeros(PARTS + 1, np.int64)
    job.acc = np.zeros(16, np.int64)
    job.local_counts = np.zeros(PARTS, np.int64)
    job.lasts = np.zeros(PARTS, np.int64)
    call = job.label_strips
"""

VOLUME_JOB = """
    job = gccl_cpu.Volumes(
        count=PARTS, depth=2**40, height=0, width=1, image_type=0, value_type=0, rule=1,
        connectivity=26, tau_mode=TAU, floating=0, min_area=0, statistics=0, selecting=0,
        zeroed=1, rule_value=0.0, tau=0.0, relative=0.0, quadratic=0.0, image=np.zeros(1, np.uint8),
        values=np.zeros(1, np.uint8), labels=np.zeros(1, np.uint32),
        tasks=np.array([(n, 0, 2**40) for n in range(PARTS)], np.int64),
        slabs=np.zeros(PARTS * gccl_cpu.SLAB_WORDS, np.int64),
        local_counts=np.zeros(PARTS, np.int64),
    )
    call = job.label_slabs
"""


@pytest.mark.parametrize("job", [IMAGE_JOB, VOLUME_JOB], ids=["images", "volumes"])
@pytest.mark.parametrize("tau", [0, 1], ids=["binary", "tau"])
@pytest.mark.parametrize("parts", [1, 2], ids=["this-thread", "with-helpers"])
def test_ctrl_c_stops_a_long_engine_call(job, tau, parts):
    code = (
        "import numpy as np\n"
        "from ccl_cli.native import gccl_cpu\n"
        "from ccl_cli.backends.cpu.labels import start_helpers\n"
        f"PARTS, TAU = {parts}, {tau}\n"
        "start_helpers(PARTS - 1)\n" + textwrap.dedent(job) + "print('started', flush=True)\n"
        "try:\n"
        "    call(PARTS, PARTS)\n"
        "except KeyboardInterrupt:\n"
        "    print('stopped', flush=True)\n"
        "    raise SystemExit(7)\n"
        "print('ended', flush=True)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "started\n", process.stderr.read()
        time.sleep(RUNNING_SECONDS)
        assert process.poll() is None  # still walking its rows
        process.send_signal(signal.SIGINT)
        sent = time.monotonic()
        returncode = process.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        process.kill()
        process.wait()
    assert returncode == 7, process.stderr.read()
    assert took < STOP_SECONDS
