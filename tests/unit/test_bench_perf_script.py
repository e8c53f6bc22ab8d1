"""``bench.perf_script``: the scheduler's events as ``perf script`` prints them, for
``bench.p4_sched`` and ``bench.p5_sched``: every event (``parse_events``) and the fast path
for the CPU time charged to threads (``parse_runtimes``), on lines of real recordings."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.perf_script import LINE_EXAMPLE, SchedEvent, parse_events, parse_runtimes, script

# Lines of a real recording: `python -m bench.p4_trace --broker minikafka --rate 10000
# --warmup-s 1 --window-s 8 --sched --capture-only` (perf 6.1.187, Linux 6.18, this 2-vCPU
# machine, 2026-11-28 03:20 UTC), `perf script -i sched.data -F pid,tid,cpu,time,event,trace`:
# its first lines (perf itself, a migration thread, a callgrind of another engineer's), a fork
# of the consumer's threads, and lines perf printed with a thread id of -1 (threads exiting:
# prev_state X).
REAL = """\
  718/718   [000] 46067.260112: sched:sched_stat_runtime: comm=perf pid=718 runtime=65142 [ns]
  718/718   [000] 46067.260123:       sched:sched_waking: comm=migration/0 pid=18 prio=0 target_cpu=000
  718/718   [000] 46067.260129: sched:sched_stat_runtime: comm=perf pid=718 runtime=20929 [ns]
  718/718   [000] 46067.260132:       sched:sched_switch: prev_comm=perf prev_pid=718 prev_prio=120 prev_state=D ==> next_comm=migration/0 next_pid=18 next_prio=0
   18/18    [000] 46067.260137:       sched:sched_waking: comm=perf pid=718 prio=120 target_cpu=000
   18/18    [000] 46067.260139: sched:sched_migrate_task: comm=perf pid=718 prio=120 orig_cpu=0 dest_cpu=1
   18/18    [000] 46067.260143: sched:sched_stat_runtime: comm=python pid=719 runtime=103003 [ns]
   18/18    [000] 46067.260154: sched:sched_stat_runtime: comm=migration/0 pid=18 runtime=25698 [ns]
   18/18    [000] 46067.260156:       sched:sched_switch: prev_comm=migration/0 prev_pid=18 prev_prio=0 prev_state=S ==> next_comm=callgrind-amd64 next_pid=515 next_prio=120
  719/719   [001] 46067.298662: sched:sched_process_fork: comm=python pid=719 child_comm=python child_pid=722
  719/719   [001] 46067.298672: sched:sched_stat_runtime: comm=python pid=719 runtime=2645389 [ns]
  719/719   [001] 46067.298678:   sched:sched_wakeup_new: comm=python pid=722 prio=120 target_cpu=001
  719/725   [000] 46067.306974: sched:sched_stat_runtime: comm=rdk:broker-1 pid=725 runtime=61606 [ns]
  719/725   [000] 46067.306980: sched:sched_stat_runtime: comm=rdk:broker-1 pid=725 runtime=6011 [ns]
  719/-1    [000] 46067.306998:       sched:sched_switch: prev_comm=rdk:broker-1 prev_pid=725 prev_prio=120 prev_state=X ==> next_comm=rdk:main next_pid=723 next_prio=120
  681/-1    [000] 46067.759698: sched:sched_stat_runtime: comm=python pid=730 runtime=25948 [ns]
  681/732   [000] 46067.759709:       sched:sched_waking: comm=python pid=729 prio=120 target_cpu=000
"""
EXITED = 2  # the lines with a thread id of -1


def test_every_event_of_real_lines_with_its_task_cpu_time_and_fields() -> None:
    events = parse_events(REAL)
    assert len(events) == len(REAL.splitlines()) - EXITED
    assert events[0] == SchedEvent(46067.260112, 0, 718, 718, "sched_stat_runtime",
                                   {"comm": "perf", "pid": "718", "runtime": "65142"})
    switch = events[3]
    assert (switch.name, switch.cpu, switch.tgid, switch.tid) == ("sched_switch", 0, 718, 718)
    assert switch.fields == {"prev_comm": "perf", "prev_pid": "718", "prev_prio": "120",
                             "prev_state": "D", "next_comm": "migration/0", "next_pid": "18",
                             "next_prio": "0"}
    waking = events[1]
    assert (waking.name, waking.fields["comm"], waking.fields["pid"],
            waking.fields["target_cpu"]) == ("sched_waking", "migration/0", "18", "000")
    migrate = events[5]
    assert (migrate.name, migrate.fields["pid"], migrate.fields["dest_cpu"]) == (
        "sched_migrate_task", "718", "1")
    assert [e.name for e in events[9:12]] == ["sched_process_fork", "sched_stat_runtime",
                                             "sched_wakeup_new"]
    assert events[9].fields["child_pid"] == "722"
    # a thread of the consumer (process 719), in time order across the CPUs
    assert [(e.tgid, e.tid) for e in events[12:14]] == [(719, 725), (719, 725)]
    assert [e.time_s for e in events] == sorted(e.time_s for e in events)


def test_lines_of_exited_threads_and_other_text_are_passed_over() -> None:
    noise = "'trace' not valid for hardware events. Ignoring.\n\n" + REAL
    assert parse_events(noise) == parse_events(REAL)
    assert parse_runtimes(noise) == parse_runtimes(REAL)
    assert all(e.tid != -1 and e.time_s not in (46067.306998, 46067.759698)
               for e in parse_events(REAL))


def _runtimes_of(events: list[SchedEvent]) -> dict[int, list[tuple[int, int]]]:
    """What ``parse_runtimes`` reads, taken from every event instead."""
    out: dict[int, list[tuple[int, int]]] = {}
    for e in events:
        if e.name == "sched_stat_runtime":
            out.setdefault(int(e.fields["pid"]), []).append(
                (round(e.time_s * 1e9), int(e.fields["runtime"])))
    return out


def test_the_fast_path_reads_the_runtimes_every_event_holds() -> None:
    runtimes = parse_runtimes(REAL)
    assert runtimes == _runtimes_of(parse_events(REAL))
    # charged to the thread named in the event (pid=), not the task it ran on
    assert runtimes[719] == [(46067_260143_000, 103003), (46067_298672_000, 2645389)]
    assert runtimes[725] == [(46067_306974_000, 61606), (46067_306980_000, 6011)]
    assert 730 not in runtimes  # its one runtime was on a line of an exited thread
    assert parse_runtimes(LINE_EXAMPLE) == {26736: [(35791_507550_000, 54923)]}


# The recorded command: a process that names itself with a space in its name (as a JVM's
# threads are named, "C2 CompilerThre"), then runs for 20 ms of its CPU time and sleeps,
# five times (CPU time: however loaded the machine, it is charged 100 ms).
_WORKLOAD = """
import ctypes, time
ctypes.CDLL(None).prctl(15, b"two words", 0, 0, 0)
for _ in range(5):
    end = time.thread_time() + 0.02
    while time.thread_time() < end:
        pass
    time.sleep(0.01)
"""


@pytest.mark.timeout(120)
def test_a_recording_made_here_is_read_whole(tmp_path: Path) -> None:
    """``perf sched record`` of every CPU while a small process runs, read back with
    ``script``: every event line perf prints is read, the runtimes agree, and the process
    is seen by the name it gave itself."""
    if shutil.which("perf") is None:
        pytest.skip("no perf on this machine")
    data = tmp_path / "sched.data"
    record = subprocess.run(["perf", "sched", "record", "-o", str(data), "--",
                             sys.executable, "-c", _WORKLOAD],
                            capture_output=True, text=True, timeout=60, check=False)
    if record.returncode != 0:
        pytest.skip(f"perf cannot record the scheduler here: {record.stderr[-500:]}")
    text = script(data)
    events = parse_events(text)
    lines = [line for line in text.splitlines() if re.search(r"\d: +sched:\w+: ", line)]
    exited = [line for line in lines if line.split()[0].endswith("/-1")]
    assert len(events) == len(lines) - len(exited) > 0
    assert parse_runtimes(text) == _runtimes_of(events)
    named = [e for e in events if e.name == "sched_stat_runtime"
             and e.fields.get("comm") == "two words"]
    # 100 ms charged, less what perf printed as an exiting thread's (a tick's worth at most)
    assert sum(int(e.fields["runtime"]) for e in named) > 50_000_000
