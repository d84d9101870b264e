"""`gccl label --scheduler ADDRESS`: the same run on the workers of a Dask distributed cluster.

The run is sent in tasks (tasks.py); `dask cuda worker` gives each worker one
GPU, so --device auto or cuda takes it. Workers read inputs and write outputs
on shared storage, by absolute paths. A worker that dies has its task rerun on
another by Dask.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..config import Settings
from ..errors import UsageError
from .records import Admitted, Outcomes
from .tasks import TaskRunner, label_task

#: Seconds to wait for the scheduler to answer.
CONNECT_TIMEOUT = 10.0
#: Reruns of a task that raised (a worker that dies has its task rerun anyway).
RETRIES = 2


class Cluster:
    """A connection to a Dask scheduler, and the labeling of admitted records on its workers."""

    def __init__(self, address: str) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise UsageError(
                "--scheduler needs Dask distributed: pip install 'gccl[cluster]'"
            ) from None
        try:
            self.client = Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except OSError:  # includes the timeout; config checked the address's form
            raise UsageError(
                f"--scheduler {address}: no Dask scheduler answered within {CONNECT_TIMEOUT:g} s"
            ) from None

    def close(self) -> None:
        """Disconnect from the scheduler."""
        self.client.close()

    def label(
        self,
        admitted: Iterable[Admitted | None],
        settings: Settings,
        outcomes: Outcomes,
        check_stop: Callable[[], None],
    ) -> None:
        """Label `admitted` in tasks on the cluster's workers (tasks.TaskRunner)."""
        TaskRunner(self._submit, self.client.cancel, "the cluster task failed").label(
            admitted, settings, outcomes, check_stop
        )

    def _submit(self, task: list[Admitted], settings: Settings) -> Any:
        # pure=False: a fresh key, so a second run never gets an earlier run's result.
        return self.client.submit(label_task, task, settings, pure=False, retries=RETRIES)
