"""What the fork server of `--processes` loads once, before it forks any worker.

The worker's set-up and tasks (processes.py, tasks.py), the labeling service
and the CPU engine, with numba ready to label: its numpy support imported
without the BLAS probe and its implementation registries loaded
(numba_start.py). Each worker would otherwise do that before its first
image. Importing this module does the work: the fork server can only import.
"""

from __future__ import annotations

from ..backends.cpu.numba_start import ready_numba
from . import processes, service  # noqa: F401  (loaded for the workers)

ready_numba()
