"""What the fork server of `--processes` loads once, before it forks any worker.

The worker's set-up and tasks (processes.py, tasks.py) and the CPU engine with
its extension module loaded, so that a worker labels at once.
Importing this module does the work: the fork server can only import.
"""

from __future__ import annotations

from ..backends.cpu import backend  # noqa: F401  (loaded for the workers)
from ..native import gccl_cpu  # noqa: F401
from . import processes  # noqa: F401
