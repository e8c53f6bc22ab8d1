"""The log on disk, in Apache Kafka's own format (segments, indexes, checkpoints).

Modules, one job each:

- ``config``: ``LogConfig``, topic-level settings by Kafka's names and defaults.
- ``naming``: file and directory names (``<topic>-<partition>``, 20-digit segments).
- ``index``: mmap'd offset and time indexes.
- ``segment``: one ``.log`` file with its indexes.
- ``batches``: produce-path checks on incoming batches; ``AppendInfo``.
- ``log``: ``Log``, a partition's log (append, read -> FileSlice, roll, truncate).
- ``recovery``: crash recovery of a segment; ``loader``: opening a partition directory.
- ``retention``: which segments retention deletes.
- ``cleaner``: the log cleaner (compaction): its threads in the broker, the swap;
  ``cleaner_engine``: one cleaning (runs in a worker process); ``cleaner_process`` /
  ``cleaner_worker`` / ``cleaner_channel``: the worker processes, both ends and what they
  say; ``cleaner_manager``: which log
  to clean and ``cleaner-offset-checkpoint``; ``cleaner_filter`` / ``cleaner_records``: what
  a cleaning keeps and the bytes it writes; ``offset_map``: key -> latest offset;
  ``cleaner_scan``: the per-record loops (compiled by mypyc with ``scripts/build-native``;
  ``cleaner_native`` picks the compiled build or the pure module).
- ``testhooks``: test-only pause points (environment only, off by default).
- ``epoch_cache``: the leader epoch cache (``leader-epoch-checkpoint``).
- ``checkpoints``: Kafka's checkpoint, ``partition.metadata`` and ``meta.properties`` files.
- ``partition_metadata``: when a log's ``partition.metadata`` is written (recorded at
  creation, written after it, many at once, and before the log's first data).
- ``log_dir``: one log directory (lock, checkpoints, loading its partitions).
- ``manager``: ``LogManager``, every log of the log directories (JBOD).
- ``fileio``: every write to disk goes through it (and a test-only fault injection hook).
- ``log_dir_failure``: disk errors sorted (full disk vs failed dir), offline log dirs.
- ``throttled_log``: rate-limited log lines (one per condition per interval).
- ``dump``: ``minikafka dump-log`` (like ``kafka-dump-log.sh``).

Nothing here imports asyncio: the broker calls cheap methods (append, read) from its
event loop and blocking ones (flush, retention, recovery, close) from a thread pool; the
cleaner's work runs in worker processes, and its threads take a log's lock only to swap
segments.
"""

import protocol as _protocol  # noqa: F401  (installs protocol.native's finder first)
