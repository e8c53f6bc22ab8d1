"""A broker warmed up with a scenario's own load, unmeasured, before its measured runs.

A fresh JVM compiles its hot paths while it serves: Kafka's first seconds of a load run at
several times the CPU per request it settles at (P5: 374 -> 60 us per request over 40 s of
its load, ``bench/results/per-request-cpu/2026-11-27-p5warm.md``), and the bench's general
warm-up before the scenarios (``bench.runner.warm_up``) is too little of it. A scenario whose
figures a cold broker would distort warms each broker up in its prepare step (the other
brokers paused) with ``warm_until_steady``: runs of its own load, ``WarmUp.run_s`` seconds
each, for at least ``min_s``, then until two runs in a row no longer cut the scenario's
steadiness measure (lower is better: the broker's CPU per request or per record) by
``STEP`` below the lowest before them, for at most ``max_s``. Both brokers get the same;
``describe`` says what it did, for the report's notes. P5 and P4 use it (``bench.scenarios``);
``bench.p5_sched`` and ``bench.p4_trace`` warm their brokers through those scenarios' prepare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

# The warm-up ends (past its minimum) once its last two runs did not cut the steadiness
# measure by this fraction of the lowest before them.
STEP: Final[float] = 0.05


@dataclass(frozen=True, slots=True)
class WarmUp:
    """How long a scenario warms a broker up: runs of ``run_s`` seconds of its load, at least
    ``min_s`` of them, at most ``max_s`` (0: no warm-up, as in ``--quick``)."""

    min_s: float
    max_s: float
    run_s: float


NO_WARM_UP: Final[WarmUp] = WarmUp(min_s=0.0, max_s=0.0, run_s=0.0)

# One warm-up run's figures by name (the steadiness measure among them).
RunFigures = dict[str, float]


def steady(measures: list[float], warmed_s: float, warm_up: WarmUp) -> bool:
    """Whether a broker's warm-up is done, after runs whose steadiness measures were
    ``measures`` (in order, lower is better), ``warmed_s`` seconds of them: at least
    ``warm_up.min_s``, then until two runs in a row no longer cut the measure by STEP below
    the lowest before them (a JVM still compiling its hot paths does, with a noisy run now
    and then), at most ``warm_up.max_s``."""
    if warmed_s >= warm_up.max_s:
        return True
    if warmed_s < warm_up.min_s or len(measures) < 3:
        return False
    return min(measures[-2:]) > (1.0 - STEP) * min(measures[:-2])


def warm_until_steady(warm_up: WarmUp, run: Callable[[], RunFigures],
                      measure: str) -> list[RunFigures]:
    """Call ``run`` (one unmeasured run of ``warm_up.run_s`` seconds of the scenario's load
    on the broker; its figures, ``measure`` among them) until ``steady``; each run's
    figures, in order (none when ``warm_up.max_s`` is 0)."""
    runs: list[RunFigures] = []
    warmed_s = 0.0
    while not steady([r[measure] for r in runs], warmed_s, warm_up):
        runs.append(run())
        warmed_s += warm_up.run_s
    return runs


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def describe(scenario: str, load: str, broker: str, warm_up: WarmUp,
             runs: list[RunFigures]) -> str:
    """A line for the report's notes: ``scenario``'s warm-up on ``broker`` with ``load``
    (what a run of it is), each figure's values run by run."""
    names = list(runs[0]) if runs else []
    return (f"{scenario} warm-up on {broker} (unmeasured, {len(runs)} runs of "
            f"{warm_up.run_s:g} s of {load}): "
            + "; ".join(f"{name} " + ", ".join(_number(r[name]) for r in runs)
                        for name in names))
