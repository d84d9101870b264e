"""The time a benchmark run has left, predicted from the plan and the timings so far.

Every planned measurement is known before the run (runner.kernel_plan and
end_to_end_plan): its engine, level, case size and images per call. Its time is
predicted as the runner will spend it:

* one call takes rate x pixels, the rate (ms per pixel) being the engine's last one
  at this level on the same family of images and connectivity (then the same
  family, then the same labeling mode, then any; then the other engines'
  geometric mean, then a generic CPU rate), so a 1920x1080 case is predicted
  from the 640x480 one of its family as 6.75 times longer;
* a measurement makes a warm-up call, then timed calls until `repeat` or until
  they add up to the budget (runner.Limits), and none at all where a batch's call
  would pass the cap (its batch-1 time times the batch);
* plus what the runner does around the calls (preparing the batch, checking the
  labels), at a rate per pixel learnt from the measurements done, each engine's
  first left out (it pays one-off costs: imports, thread pools).

So the first estimate, after the first measurement, already weighs the large
cases and batches to come, instead of assuming every step costs the first's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: ms per pixel assumed before any engine has been measured at a level: labeling on a CPU
#: core (kernel), decoding, labeling and writing a file (end to end).
GENERIC_RATE_MS = {"kernel": 2e-6, "end-to-end": 1e-4}
#: Pixels of fixed work every measurement does besides its calls (printing, the
#: engine's set-up), as a pixel count for the overhead rate.
STEP_PIXELS = 100_000


@dataclass(frozen=True)
class Planned:
    """One measurement the run will make.

    key: (level, case name, engine name, batch); images: images per call (the
    batch at the kernel level, the case's files end to end); warm_ups: calls
    made before the timed ones (runner); can_skip: whether the runner skips it
    when its call would pass the cap (batches above 1 at the kernel level).
    """

    level: str
    case: str
    engine: str
    batch: int
    mode: str
    family: str
    connectivity: int
    pixels: int
    images: int
    warm_ups: int
    can_skip: bool

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.level, self.case, self.engine, self.batch)

    @property
    def work(self) -> int:
        """Pixels one call labels."""
        return self.images * self.pixels


class TimeLeft:
    """Predicts the seconds a run has left (module docstring); the runner reports each
    measurement's start (started), its median call (finished) or its skip (skipped)."""

    def __init__(
        self,
        planned: Sequence[Planned],
        repeat: int,
        budget_s: float,
        max_call_s: float,
        clock_s: float,
    ) -> None:
        self.pending = {step.key: step for step in planned}
        self.repeat, self.budget_ms, self.max_call_ms = repeat, budget_s * 1000, max_call_s * 1000
        #: ms per pixel: (engine, level, mode, family, connectivity) -> the last one measured
        self.rates: dict[tuple[str, str, str, str, int], float] = {}
        self.single_ms: dict[tuple[str, str], float] = {}  # (engine, case) batch-1 call
        self.overhead_ms = 0.0  # besides the calls, over the measurements learnt from
        self.overhead_pixels = 0
        self.measured: set[str] = set()  # engines measured once
        self.current: Planned | None = None
        self.current_since = clock_s

    def started(self, key: tuple[str, str, str, int], clock_s: float) -> None:
        """The measurement `key` starts at `clock_s` (seconds on the caller's clock)."""
        self.current = self.pending.pop(key, None)
        self.current_since = clock_s

    def finished(self, call_ms: float | None, clock_s: float) -> None:
        """The measurement started last ended at `clock_s`; its median call, or None when it
        failed (its time still teaches the overhead rate nothing)."""
        step, self.current = self.current, None
        if step is None or call_ms is None:
            return
        rate = call_ms / max(step.work, 1)
        self.rates[(step.engine, step.level, step.mode, step.family, step.connectivity)] = rate
        if step.batch == 1 and step.level == "kernel":
            self.single_ms[(step.engine, step.case)] = call_ms
        if step.engine in self.measured:
            wall_ms = (clock_s - self.current_since) * 1000
            self.overhead_ms += max(0.0, wall_ms - self._calls_ms(step, call_ms))
            self.overhead_pixels += step.work + STEP_PIXELS
        self.measured.add(step.engine)

    def skipped(self, key: tuple[str, str, str, int]) -> None:
        """The measurement `key` will not be made."""
        self.pending.pop(key, None)

    def seconds(self, clock_s: float) -> float:
        """Predicted seconds until the last planned measurement ends."""
        total_ms = sum(self._predicted_ms(step) for step in self.pending.values())
        if self.current is not None:  # the one under way: what it has left
            running_ms = (clock_s - self.current_since) * 1000
            total_ms += max(0.0, self._predicted_ms(self.current) - running_ms)
        return total_ms / 1000

    def _predicted_ms(self, step: Planned) -> float:
        single = self.single_ms.get((step.engine, step.case))
        call_ms = self._rate(step) * step.work
        if step.can_skip:
            batch_one = single if single is not None else call_ms / step.batch
            if batch_one * step.batch > self.max_call_ms:
                return 0.0
        overhead_rate = self.overhead_ms / self.overhead_pixels if self.overhead_pixels else 0.0
        return self._calls_ms(step, call_ms) + overhead_rate * (step.work + STEP_PIXELS)

    def _calls_ms(self, step: Planned, call_ms: float) -> float:
        """The warm-ups and the timed calls of one measurement (timing.measure's rule)."""
        timed = min(self.repeat, max(1, math.ceil(self.budget_ms / max(call_ms, 1e-6))))
        return call_ms * (timed + step.warm_ups)

    def _rate(self, step: Planned) -> float:
        """The call rate of `step` (module docstring): the closest measurement's."""
        mine = [
            (key[2:], rate)
            for key, rate in self.rates.items()
            if key[:2] == (step.engine, step.level)
        ]
        for matches in (
            lambda k: k == (step.mode, step.family, step.connectivity),
            lambda k: k[:2] == (step.mode, step.family),
            lambda k: k[0] == step.mode,
            lambda k: True,
        ):
            found = [rate for key, rate in mine if matches(key)]
            if found:
                return found[-1]
        for wanted_mode in (step.mode, None):
            others = [
                rate
                for (_, level, mode, _, _), rate in self.rates.items()
                if level == step.level and wanted_mode in (None, mode)
            ]
            if others:
                return math.exp(sum(math.log(r) for r in others) / len(others))
        return GENERIC_RATE_MS[step.level]
