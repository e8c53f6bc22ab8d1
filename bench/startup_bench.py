"""Start-up of one in-process broker, imports included: ``python -m bench.startup_bench``.

Each start is a fresh interpreter (``python -c``) that imports the pytest plugin's broker
harness, starts one broker on an empty log dir (``InProcessBroker``, what the
``kafka_broker`` fixture does) and sends one ApiVersions request over a raw socket. The
times are ``time.monotonic()`` (one clock for every process on Linux) from just before the
parent spawns the interpreter:

- ``interpreter``: until the child runs its first line;
- ``imports``: the harness and the broker's modules (``broker.server``, uvloop);
- ``broker start``: ``start()`` until it returns (the broker serves requests);
- ``first request``: connect, send ApiVersions, read the answer;
- ``first response``: the ApiVersions answer read: **the start-up time**.

``--cli`` measures the command instead: ``python -m cli broker`` (what the ``minikafka``
console script runs) on an empty log dir, spawned by this process, which connects to its
port every millisecond until it is open, sends ApiVersions and reads the answer; reported
are the time from spawning to the answer and the broker's CPU time (``/proc``) at that
point. The broker is then stopped with SIGTERM.

``--cli --instructions`` runs the same command under valgrind's callgrind instead and
reports the instructions it executed up to the first answer (``callgrind_control -e Ir``
once the answer is read; every thread): independent of the machine's load, so start-ups
can be compared while other work runs. Wall time is not reported then (valgrind is ~50x
slower); ``--starts`` defaults to 3 there (the count moves by well under 1%).

Also the child's CPU time (user + system) up to the answer: on a loaded machine wall
times stretch with the load, CPU time much less. Reported: median, min and max over
``--starts`` (20) starts, after one unmeasured start that writes the bytecode cache (as
``pip install`` would have; ``--no-bytecode`` measures without one). ``--src DIR`` runs
another source tree (e.g. an older checkout, through PYTHONPATH) for comparison; a tree
without the harness starts ``BrokerServer`` inline the same way (a thread, its loop).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import loadavg
from bench.procs import free_port, tree_cpu_s

REPO = Path(__file__).resolve().parents[1]
INSTRUCTIONS_TIMEOUT_S = 600.0  # the interpreter runs ~50x slower under valgrind

CHILD = r"""
import json, os, resource, socket, struct, sys, time
t_begin = time.monotonic()
log_dir, harness = sys.argv[1], sys.argv[2]
if harness == "pytest_minikafka.InProcessBroker":
    from pytest_minikafka import InProcessBroker, base_properties
import broker.server, broker.config, uvloop
t_imports = time.monotonic()
if harness == "inline BrokerServer":
    import asyncio, threading
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": log_dir,
             "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}
    config = broker.config.BrokerConfig.from_properties(props)
    state = {}
    ready = threading.Event()
    async def main():
        server = broker.server.BrokerServer(config, install_signal_handlers=False)
        state["server"], state["loop"] = server, asyncio.get_running_loop()
        task = asyncio.create_task(server.run())
        b = await server.wait_started()
        state["port"] = b.advertised.port
        ready.set()
        await task
    thread = threading.Thread(target=lambda: uvloop.run(main()), daemon=True)
    thread.start()
    ready.wait(120)
    port = state["port"]
else:
    from pathlib import Path
    b = InProcessBroker(base_properties(Path(log_dir), None)).start()
    port = b.port
t_started = time.monotonic()
s = socket.create_connection(("127.0.0.1", port))
req = struct.pack(">hhih", 18, 0, 1, -1)
s.sendall(struct.pack(">i", len(req)) + req)
buf = b""
while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
    chunk = s.recv(65536)
    assert chunk, "connection closed"
    buf += chunk
t_answer = time.monotonic()
usage = resource.getrusage(resource.RUSAGE_SELF)
s.close()
if harness == "inline BrokerServer":
    state["loop"].call_soon_threadsafe(state["server"].request_stop)
    thread.join(60)
else:
    b.stop()
print(json.dumps({"begin": t_begin, "imports": t_imports, "started": t_started,
                  "answer": t_answer, "cpu": usage.ru_utime + usage.ru_stime,
                  "harness": harness}))
"""


def one_start(python: str, env: dict[str, str], harness: str) -> dict[str, float | str]:
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        spawned = time.monotonic()
        # cwd: the temporary dir, so that only PYTHONPATH says where the sources are.
        out = subprocess.run([python, "-c", CHILD, os.path.join(tmp, "data"), harness], env=env,
                             cwd=tmp, capture_output=True, text=True, timeout=300, check=False)
    if out.returncode != 0:
        raise SystemExit(f"start failed ({out.returncode}):\n{out.stderr}")
    times = json.loads(out.stdout.strip().splitlines()[-1])
    return {"interpreter": times["begin"] - spawned,
            "imports": times["imports"] - times["begin"],
            "broker start": times["started"] - times["imports"],
            "first request": times["answer"] - times["started"],
            "first response": times["answer"] - spawned,
            "cpu": times["cpu"], "harness": times["harness"]}


def _api_versions(port: int, deadline: float) -> None:
    """Connect (retrying while the port is closed), send ApiVersions v0, read the answer."""
    req = struct.pack(">hhih", 18, 0, 1, -1)
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)
    with sock:
        sock.sendall(struct.pack(">i", len(req)) + req)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk


def one_cli_start(python: str, env: dict[str, str]) -> dict[str, float | str]:
    """``python -m cli broker`` on an empty log dir, to its first answer."""
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        port = free_port()
        argv = [python, "-m", "cli", "broker",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--override", f"log.dirs={os.path.join(tmp, 'data')}"]
        spawned = time.monotonic()
        proc = subprocess.Popen(argv, env=env, cwd=tmp, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            _api_versions(port, spawned + 120)
            answer = time.monotonic()
            cpu = tree_cpu_s(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return {"first response": answer - spawned, "cpu": cpu, "harness": "python -m cli broker"}


def one_cli_instructions(python: str, env: dict[str, str], out_dir: Path) -> dict[str, float | str]:
    """``python -m cli broker`` under callgrind: instructions to its first answer."""
    from bench.instructions import instructions

    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        port = free_port()
        argv = ["valgrind", "--tool=callgrind", "--trace-children=no",
                f"--callgrind-out-file={out_dir}/callgrind.startup.%p",
                python, "-m", "cli", "broker",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--override", f"log.dirs={os.path.join(tmp, 'data')}"]
        proc = subprocess.Popen(argv, env={**env, "PYTHONHASHSEED": "0"}, cwd=tmp,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _api_versions(port, time.monotonic() + INSTRUCTIONS_TIMEOUT_S)
            count = instructions(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(INSTRUCTIONS_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return {"instructions": float(count), "harness": "python -m cli broker (callgrind)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=None, help="default 20 (3 with --instructions)")
    parser.add_argument("--src", type=Path, default=None,
                        help="source tree to run instead of this one (via PYTHONPATH)")
    parser.add_argument("--cli", action="store_true",
                        help="time `python -m cli broker` (the minikafka command) instead")
    parser.add_argument("--instructions", action="store_true",
                        help="with --cli: count instructions to the first answer (callgrind)")
    parser.add_argument("--out-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "startup-instructions",
                        help="where callgrind's profiles go (--instructions)")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="measure without a bytecode cache (PYTHONDONTWRITEBYTECODE=1)")
    args = parser.parse_args()
    if args.instructions and not args.cli:
        parser.error("--instructions needs --cli")
    if args.starts is None:
        args.starts = 3 if args.instructions else 20
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if not args.cli:  # the command logs as a user's would (INFO)
        env["MINIKAFKA_LOG_LEVEL"] = "WARN"
    if args.no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    src = (args.src or REPO).resolve()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    python = sys.executable
    harness = ("pytest_minikafka.InProcessBroker" if (src / "pytest_minikafka").is_dir()
               else "inline BrokerServer")
    print(f"source {src}; {args.starts} starts; bytecode cache "
          f"{'off' if args.no_bytecode else 'on'}; load average before: {loadavg()}")
    def start() -> dict[str, float | str]:
        if args.instructions:
            args.out_dir.mkdir(parents=True, exist_ok=True)
            return one_cli_instructions(python, env, args.out_dir)
        return one_cli_start(python, env) if args.cli else one_start(python, env, harness)

    # writes the bytecode cache; not counted (without valgrind: the cache is the same)
    one_cli_start(python, env) if args.cli else start()
    runs = [start() for _ in range(args.starts)]
    print(f"harness: {runs[0]['harness']}; load average after: {loadavg()}")
    if args.instructions:
        counts = [int(r["instructions"]) for r in runs]
        print(f"instructions to first response: median {statistics.median(counts):,.0f}   "
              f"min {min(counts):,}   max {max(counts):,}")
        return
    keys = (("first response", "cpu") if args.cli else
            ("interpreter", "imports", "broker start", "first request", "first response", "cpu"))
    for key in keys:
        values = [float(r[key]) for r in runs]
        label = "CPU to first response" if key == "cpu" else key
        print(f"{label:<24} median {statistics.median(values) * 1000:8.1f} ms   "
              f"min {min(values) * 1000:8.1f} ms   max {max(values) * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
