"""How long each Produce request of a ``bench.p4_trace`` run waited in the broker: an ad-hoc
analysis of a run's work dir (``python produce_answers.py WORK_DIR``, from the checkout).

The capture keeps each segment's length and record stamps, not its bytes, so the Produce
requests in a segment are counted from its length: ``F`` bytes per request (frame, request
header, batch header) and ``R`` per 100-byte record, both read off the segments holding one
and two records; a segment of ``n`` records and ``L`` bytes holds ``(L - n R) // F``
requests (a record of a batch past its 64th takes a byte more, which the floor absorbs).
The broker answers a connection's requests in order, one 59-byte Produce answer each, so the
k-th answer is the k-th request's (aligned from the end). Exact where the counts of requests
and answers agree (10,000/s here); at 50,000/s they differed by ~0.1% and the alignment is
off, so only the 10,000/s figures are quoted.
"""

from __future__ import annotations

import bisect
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))
from bench.p4_trace import _segments


def pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def main(work: Path) -> None:
    port = json.loads((work / "run.json").read_text())["port"]
    segs, _ = _segments(work / "segments.jsonl")
    producers = {s[1] for s in segs if s[2] == port and s[4]}
    pp = max(producers, key=lambda p: sum(1 for s in segs if s[1] == p))
    reqs = [s for s in segs if s[1] == pp and s[2] == port and s[4]]
    acks = [s[0] for s in segs if s[2] == pp and s[1] == port and s[3] == 59]
    one = min(s[3] for s in reqs if len(s[4]) == 1)
    r = min(s[3] for s in reqs if len(s[4]) == 2) - one
    f = one - r
    frames: list[int] = []
    for s in reqs:
        frames += [s[0]] * max(1, (s[3] - len(s[4]) * r) // f)
    print(f"R={r} F={f}: {len(reqs)} request segments, {len(frames)} Produce requests, "
          f"{len(acks)} answers")
    k = min(len(frames), len(acks))
    frames, acks = frames[-k:], acks[-k:]
    waits = sorted((a - t) / 1e6 for t, a in zip(frames, acks, strict=True))
    print("request in -> its answer out (ms): "
          + ", ".join(f"p{p:g} {pct(waits, p):.3f}" for p in (1, 50, 90, 99, 99.9, 100)))
    waiting = sorted(i - bisect.bisect_left(acks, t) for i, t in enumerate(frames))
    print("requests unanswered when one came in: "
          + ", ".join(f"p{p:g} {pct(waiting, p)}" for p in (50, 90, 99, 99.9, 100)))
    busy: list[float] = []
    idle: list[float] = []
    for j in range(1, len(acks)):
        backlog = bisect.bisect_right(frames, acks[j - 1]) - j
        (busy if backlog >= 5 else idle).append((acks[j] - acks[j - 1]) / 1e3)
    busy.sort()
    idle.sort()
    if busy:
        print(f"answer intervals with >= 5 requests waiting: {len(busy)}, p50 "
              f"{pct(busy, 50):.0f} us, p90 {pct(busy, 90):.0f} us")
    print(f"answer intervals otherwise: p50 {pct(idle, 50):.0f} us")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
