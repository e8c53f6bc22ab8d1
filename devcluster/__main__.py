"""``python -m devcluster zookeeper [--nodes 3] [--dir DIR]``: a ZooKeeper in the foreground.

Starts a standalone server or an ensemble on free ports of 127.0.0.1, prints its connect
string (``zookeeper.connect=...`` for a broker's properties) and runs until SIGINT/SIGTERM,
then stops every node. Data stay in ``--dir`` (a temporary directory by default, removed).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from devcluster.zookeeper import ZooKeeper, ZooKeeperError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devcluster")
    sub = parser.add_subparsers(dest="command", required=True)
    zk = sub.add_parser("zookeeper", help="run a ZooKeeper server or ensemble until stopped")
    zk.add_argument("--nodes", type=int, default=1, help="1 (standalone) or an ensemble size")
    zk.add_argument("--dir", type=Path, default=None, help="data and logs (default: temporary)")
    args = parser.parse_args(argv)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    with tempfile.TemporaryDirectory(prefix="minikafka-zk-") as tmp:
        work_dir = args.dir or Path(tmp)
        try:
            server = ZooKeeper(work_dir, nodes=args.nodes, force_sync=True).start()
        except (ZooKeeperError, ValueError) as exc:
            print(f"devcluster: {exc}", file=sys.stderr)
            return 1
        try:
            print(f"zookeeper.connect={server.connect_string}  (logs in {work_dir})", flush=True)
            stop.wait()
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
