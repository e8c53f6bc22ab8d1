"""The bench's per-broker warm-up (``bench.warming``): when a broker has served enough of a
scenario's load, unmeasured, for its measured runs to be warm ones (P5's figures here)."""

from __future__ import annotations

from bench.context import QUICK
from bench.warming import WarmUp, describe, steady, warm_until_steady

P5 = WarmUp(min_s=20.0, max_s=60.0, run_s=5.0)


def test_the_warm_up_lasts_its_minimum_even_when_the_broker_is_steady_at_once() -> None:
    assert not steady([], 0.0, P5)
    assert not steady([54.0, 54.0, 54.0], 15.0, P5)
    assert steady([54.0, 54.0, 54.0, 54.0], 20.0, P5)


def test_it_goes_on_while_the_runs_still_cut_the_measure() -> None:
    # Kafka's JIT at work (a fresh JVM, 5-s runs of P5 on a loaded machine: us per request).
    runs = [854.0, 555.0, 480.0, 291.0]
    assert not steady(runs, 20.0, P5)
    assert not steady([*runs, 345.0], 25.0, P5)  # one noisy run does not end it
    assert not steady([*runs, 345.0, 120.0], 30.0, P5)
    assert not steady([*runs, 345.0, 120.0, 82.0], 35.0, P5)
    assert steady([*runs, 345.0, 120.0, 82.0, 80.0, 83.0], 45.0, P5)  # two runs, < 5%: warm


def test_it_ends_at_its_maximum_whatever_the_runs_say() -> None:
    falling = [300.0 * 0.8**i for i in range(12)]
    assert steady(falling, 60.0, P5)
    assert not steady(falling[:11], 55.0, P5)


def test_warm_until_steady_runs_the_load_until_steady_and_returns_each_runs_figures() -> None:
    measures = iter([374.0, 334.0, 215.0, 122.0, 76.8, 61.3, 67.0, 59.5, 1.0])
    calls: list[int] = []

    def one_run() -> dict[str, float]:
        calls.append(1)
        return {"requests/s": 1000.0 * len(calls), "us": next(measures)}

    runs = warm_until_steady(P5, one_run, "us")
    # 61.3 is more than 5% below 76.8; 67.0 and 59.5 are not below 0.95 * 61.3.
    assert [r["us"] for r in runs] == [374.0, 334.0, 215.0, 122.0, 76.8, 61.3, 67.0, 59.5]
    note = describe("P5", "P5's load", "Kafka", P5, runs)
    assert note.startswith("P5 warm-up on Kafka (unmeasured, 8 runs of 5 s of P5's load): ")
    assert "requests/s 1,000, 2,000," in note and "us 374, 334, 215, 122, 76.8," in note


def test_quick_mode_has_no_warm_up() -> None:
    for warm_up in (QUICK.p5_warm_up, QUICK.p4_warm_up):
        assert warm_up.max_s == 0.0
        assert warm_until_steady(warm_up, lambda: {"us": 1.0}, "us") == []
