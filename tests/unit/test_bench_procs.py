"""``bench.procs.paused``: the runner pauses every broker but the one it measures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.procs import paused, spawn, stop
from tests.waiting import wait_for


def _state(pid: int) -> str:
    """The process's state letter from /proc (T: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def _child(tmp_path: Path) -> subprocess.Popen[bytes]:
    # A process group of two: the child and a grandchild (as a broker and its workers).
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
            "time.sleep(300)")
    return spawn([sys.executable, "-c", code], log_path=tmp_path / "child.log")


def _group(pid: int) -> list[int]:
    """The pids of process group ``pid`` (the child and its grandchild, once started)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[2]) == pid:  # field 5: pgrp
                found.append(int(entry.name))
    return found


def test_paused_stops_each_process_group_for_the_block_and_continues_it_after(
        tmp_path: Path) -> None:
    proc = _child(tmp_path)
    pid = proc.pid
    try:
        wait_for(lambda: len(_group(pid)) == 2, 60, "the child's own child to start")
        members = _group(pid)
        with paused([pid]):
            wait_for(lambda: all(_state(p) == "T" for p in members), 30,
                     "the whole group to be stopped")
        wait_for(lambda: all(_state(p) != "T" for p in members), 30,
                 "the whole group to run again")
    finally:
        stop(proc, grace_s=10)


def test_paused_continues_the_groups_when_the_block_raises(tmp_path: Path) -> None:
    proc = _child(tmp_path)
    pid = proc.pid
    try:
        with pytest.raises(RuntimeError), paused([pid]):
            wait_for(lambda: _state(pid) == "T", 30, "the child to be stopped")
            raise RuntimeError("a run failed")
        wait_for(lambda: _state(pid) != "T", 30, "the child to run again")
    finally:
        stop(proc, grace_s=10)


def test_paused_skips_a_process_that_is_gone() -> None:
    with paused([2 ** 22 + 1]):  # above the default pid_max: never a live process
        pass
