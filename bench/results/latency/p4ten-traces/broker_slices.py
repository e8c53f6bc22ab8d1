"""Ad hoc (p4ten): the broker's event-loop thread in a ``bench.p4_trace --sched`` run: the CPU
charged to each of its slices on a CPU (``bench.p4_sched``: stolen time left out) against the
answers it wrote meanwhile (frames from the broker ending in the capture).

    PYTHONPATH=. python bench/results/latency/p4ten-traces/broker_slices.py WORK_DIR

A slice with much CPU and few answers would be work that is not serving requests (a
periodic task, a collection); long slices with many answers are the loop catching up.
"""

from __future__ import annotations

import bisect
import collections
import json
import sys
from pathlib import Path

from bench import p4_sched, p4_trace

BUCKET_MS = 0.25


def main(work: Path) -> None:
    run = json.loads((work / "run.json").read_text())
    port = run["port"]
    segments, _counts = p4_trace._segments(work / "segments.jsonl")
    roles = {int(k): v for k, v in json.loads((work / "roles.json").read_text()).items()}
    slices = p4_sched.read_slices(work / "sched.data")
    loop = min(p for p, r in roles.items() if r == "broker")  # the broker's pid: its loop thread
    outs = sorted(seg[0] for seg in segments if seg[1] == port for _end in seg[6])
    ins = sorted(seg[0] for seg in segments if seg[2] == port for _end in seg[6])
    rows: list[tuple[float, int, p4_sched.Slice]] = []
    for s in slices:
        if s.tid != loop or s.start < outs[0] or s.end > outs[-1]:
            continue
        charged = sum(r for _u, r in s.runtimes) if s.runtimes else s.end - s.start
        answers = bisect.bisect_right(outs, s.end) - bisect.bisect_left(outs, s.start)
        rows.append((charged / 1e6, answers, s))
    total = sum(r[0] for r in rows)
    answered = sum(r[1] for r in rows)
    print(f"loop slices {len(rows):,}, charged {total:,.0f} ms, answers {answered:,} "
          f"({1000 * total / max(1, answered):.0f} us per answer); requests in {len(ins):,}")
    big = [r for r in rows if r[0] > 1.0]
    print(f"slices over 1 ms charged: {len(big)}, {sum(r[0] for r in big):.0f} ms, "
          f"answers {sum(r[1] for r in big)}")
    buckets: dict[int, list[int]] = collections.defaultdict(list)
    for charged_ms, answers, _s in rows:
        buckets[min(int(charged_ms / BUCKET_MS), 12)].append(answers)
    for k in sorted(buckets):
        n = buckets[k]
        print(f"  {k * BUCKET_MS:.2f}-{(k + 1) * BUCKET_MS:.2f} ms charged: {len(n):,} slices, "
              f"{sum(n) / len(n):.2f} answers each")
    print("slices over 1 ms with the fewest answers per ms:")
    for charged_ms, answers, s in sorted(big, key=lambda r: r[1] / r[0])[:10]:
        print(f"  at {s.start / 1e9:.4f} s: charged {charged_ms:.2f} ms, wall "
              f"{(s.end - s.start) / 1e6:.2f} ms, answers {answers}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
