"""What an executor is handed with the admitted records it labels (command.Executor.label)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..config import Settings
from ..io.made import MadeFiles
from ..io.out_dir import OutDir
from .records import Outcomes


@dataclass(frozen=True)
class RunContext:
    """One run as its executor sees it.

    settings: the run's settings. outcomes: where each record's end is told.
    check_stop: raises to end the run early. out: the opened --out. made: its record of the
    files gccl made there.
    """

    settings: Settings
    outcomes: Outcomes
    check_stop: Callable[[], None]
    out: OutDir
    made: MadeFiles
