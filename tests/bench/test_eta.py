"""The bench's estimate of the time left: each planned measurement predicted as the runner
spends it, from the rates measured so far."""

from __future__ import annotations

import pytest

from ccl_cli.bench.eta import Planned, TimeLeft


def planned(engine: str, case: str, pixels: int, batch: int, family: str = "random") -> Planned:
    return Planned(
        level="kernel",
        case=case,
        engine=engine,
        batch=batch,
        mode="binary",
        family=family,
        connectivity=8,
        pixels=pixels,
        images=batch,
        warm_ups=1,
        can_skip=batch > 1,
    )


VGA, HD = 640 * 480, 1920 * 1080


def test_larger_cases_and_batches_are_predicted_from_the_rate_per_pixel():
    plan = [
        planned("a", "small", VGA, 1),
        planned("a", "large", HD, 1),
        planned("a", "large", HD, 8),
        planned("a", "large", HD, 64),
    ]
    left = TimeLeft(plan, repeat=10, budget_s=0.5, max_call_s=1.0, clock_s=0.0)
    left.started(plan[0].key, 0.0)
    left.finished(10.0, 0.11)  # 10 ms a call: a warm-up and 10 timed calls
    call = 10.0 * HD / VGA  # 67.5 ms
    large_one = call * (1 + 8)  # warm-up, then timed calls until 0.5 s: ceil(500 / 67.5) = 8
    large_eight = call * 8 * (1 + 1)  # 540 ms: one timed call passes the budget
    # batch 64 would take 4.3 s a call, past the 1 s cap: skipped, it costs nothing
    assert left.seconds(0.11) == pytest.approx((large_one + large_eight) / 1000)


def test_the_first_measurement_of_an_engine_teaches_no_overhead_later_ones_do():
    plan = [planned("a", "c1", VGA, 1), planned("a", "c2", VGA, 1), planned("a", "c3", VGA, 1)]
    left = TimeLeft(plan, repeat=1, budget_s=0.5, max_call_s=1.0, clock_s=0.0)
    left.started(plan[0].key, 0.0)
    left.finished(10.0, 5.0)  # 4.98 s of one-off costs (imports): not an overhead rate
    assert left.seconds(5.0) == pytest.approx(2 * 0.020)
    left.started(plan[1].key, 5.0)
    left.finished(10.0, 5.1)  # 80 ms besides its 20 ms of calls
    assert left.seconds(5.1) == pytest.approx(0.020 + 0.080)


def test_rates_come_from_the_same_family_then_mode_then_other_engines():
    plan = [
        planned("a", "r", VGA, 1, "random"),
        planned("a", "d", VGA, 1, "document"),
        planned("b", "d2", VGA, 1, "document"),
        planned("a", "r2", VGA, 1, "random"),
    ]
    left = TimeLeft(plan, repeat=1, budget_s=0.5, max_call_s=1.0, clock_s=0.0)
    left.started(plan[0].key, 0.0)
    left.finished(10.0, 0.02)
    left.started(plan[1].key, 0.02)
    left.finished(40.0, 0.1)
    # b unmeasured: the other engines' geometric mean (20 ms); a on random: its random rate
    assert left.seconds(0.1) == pytest.approx((2 * 20.0 + 2 * 10.0) / 1000, rel=0.01)


def test_skipped_measurements_leave_the_plan():
    plan = [planned("a", "c", VGA, 1), planned("a", "c", VGA, 8)]
    left = TimeLeft(plan, repeat=1, budget_s=0.5, max_call_s=100.0, clock_s=0.0)
    left.started(plan[0].key, 0.0)
    left.finished(10.0, 0.02)
    assert left.seconds(0.02) > 0
    left.skipped(plan[1].key)
    assert left.seconds(0.02) == 0
