"""P5's warm-up (``bench.scenarios.p5_warm``): when a broker has served enough of P5's load,
unmeasured, for its measured runs to be warm ones."""

from __future__ import annotations

from dataclasses import replace

from bench.context import FULL, QUICK
from bench.scenarios import p5_warm

SIZES = replace(FULL, p5_warmup_s=20.0, p5_warmup_max_s=60.0, p5_warmup_run_s=5.0)


def test_the_warm_up_lasts_its_minimum_even_when_the_broker_is_steady_at_once() -> None:
    assert not p5_warm([], 0.0, SIZES)
    assert not p5_warm([54.0, 54.0, 54.0], 15.0, SIZES)
    assert p5_warm([54.0, 54.0, 54.0, 54.0], 20.0, SIZES)


def test_it_goes_on_while_the_runs_still_cut_the_cpu_per_request() -> None:
    # Kafka's JIT at work (a fresh JVM, 5-s runs on a loaded machine).
    runs = [854.0, 555.0, 480.0, 291.0]
    assert not p5_warm(runs, 20.0, SIZES)
    assert not p5_warm([*runs, 345.0], 25.0, SIZES)  # one noisy run does not end it
    assert not p5_warm([*runs, 345.0, 120.0], 30.0, SIZES)
    assert not p5_warm([*runs, 345.0, 120.0, 82.0], 35.0, SIZES)
    assert p5_warm([*runs, 345.0, 120.0, 82.0, 80.0, 83.0], 45.0, SIZES)  # two runs, < 5%: warm


def test_it_ends_at_its_maximum_whatever_the_runs_say() -> None:
    falling = [300.0 * 0.8**i for i in range(12)]
    assert p5_warm(falling, 60.0, SIZES)
    assert not p5_warm(falling[:11], 55.0, SIZES)


def test_quick_mode_has_no_p5_warm_up() -> None:
    assert QUICK.p5_warmup_max_s == 0.0
    assert p5_warm([], 0.0, QUICK)
