"""The load during a run: stock clients in threads of the harness, every operation recorded.

- ``KafkaPythonWriter``: kafka-python's ``KafkaProducer`` (idempotent, acks=all by default);
- ``ConfluentWriter``: confluent-kafka's ``Producer`` (librdkafka), idempotent acks=all, or
  plain acks=1 (retries on, no idempotence: the documented weaker promise);
- ``GroupConsumer``: kafka-python's ``KafkaConsumer`` in a group, committing what it read
  after each poll (synchronous commit of explicit offsets), each acknowledged commit recorded;
- ``OffsetObserver``: the project's client reading the group's committed offsets every
  ``interval_s`` (what a newcomer to the group would start from).

Each writer sends its records numbered 0, 1, 2, ... (``history.record_value``), record ``n``
to partition ``n % partitions`` (explicit, so per-partition order is the writer's order), at
``rate`` records per second, with at most ``max_pending`` unanswered (then it waits: a
stalled cluster shows as a gap in acknowledgements, not as a pile of queued sends). A client
that reports a fatal error (an idempotent producer fenced or out of sequence) is closed and
replaced by a new instance; the records keep their numbering.

Every client call is bounded (request, delivery and block timeouts below); ``stop()`` lets
in-flight sends finish for at most ``FLUSH_TIMEOUT_S``; what is still unanswered stays
``unknown`` in the history.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, Final

from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import KafkaException as ConfluentException
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as KafkaPythonError
from kafka.structs import OffsetAndMetadata, TopicPartition

from client.sync import SyncClient
from tests.chaos.history import Commit, History, Send, record_value

log = logging.getLogger(__name__)

# Kafka's client defaults for the request timeout; a delivery timeout of half the default
# (120 s), so that a record still unanswered when the load stops is answered within the
# flush bound rather than left unknown.
REQUEST_TIMEOUT_MS: Final = 30_000
DELIVERY_TIMEOUT_MS: Final = 60_000
MAX_BLOCK_MS: Final = 5_000
FLUSH_TIMEOUT_S: Final = 65.0
CLOSE_TIMEOUT_S: Final = 5.0
ERROR_PAUSE_S: Final = 0.2


class Writer(threading.Thread):
    """A producer workload; subclasses talk to one client library."""

    def __init__(self, name: str, history: History, bootstrap: str, topic: str,
                 partitions: int, *, acks: int, idempotent: bool, rate: float,
                 max_pending: int = 1000) -> None:
        super().__init__(name=f"writer-{name}", daemon=True)
        self.writer = name
        self.history = history
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.acks = acks
        self.idempotent = idempotent
        self.rate = rate
        self.max_pending = max_pending
        self.instance = 0
        self.seq = 0
        self._halt = threading.Event()
        self._pending = 0
        self._pending_lock = threading.Lock()
        self.errors = 0
        self.crashed: str | None = None

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # the harness must hear of a writer that stopped
            self.crashed = repr(exc)
            self.history.note(f"{self.writer}: writer stopped: {exc!r}")
            raise

    def _loop(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        self.open()
        try:
            while not self._halt.is_set():
                try:
                    self.service()
                except Exception as exc:  # librdkafka raises a fatal error from poll()
                    self.errors += 1
                    self.replace(f"the client raised {exc!r}")
                    continue
                now = time.monotonic()
                if now < next_at:
                    self._halt.wait(next_at - now)
                    continue
                next_at = max(next_at + interval, now - 1.0)  # no burst after a stall
                if self.pending() >= self.max_pending:
                    self._halt.wait(0.01)
                    continue
                partition = self.seq % self.partitions
                event = self.history.send(self.writer, self.instance, self.seq, self.topic,
                                          partition, self.acks)
                self.seq += 1
                self._add_pending(1)
                try:
                    self.send(event)
                except Exception as exc:  # the client refused the send: a failed record
                    self.history.done(event, "fail", error=f"send: {exc!r}")
                    self._add_pending(-1)
                    self.errors += 1
                    if self.is_fatal(exc):
                        self.replace(f"send raised {exc!r}")
                    else:
                        self._halt.wait(ERROR_PAUSE_S)
        finally:
            self.close(FLUSH_TIMEOUT_S)

    def stop(self) -> None:
        self._halt.set()

    def pending(self) -> int:
        with self._pending_lock:
            return self._pending

    def _add_pending(self, delta: int) -> None:
        with self._pending_lock:
            self._pending += delta

    def answered(self, event: Send, *, offset: int | None = None,
                 error: str | None = None) -> None:
        """A client callback: the record's outcome (called from the client's thread)."""
        if error is None:
            self.history.done(event, "ok", offset=offset)
        else:
            self.history.done(event, "fail", error=error)
        self._add_pending(-1)

    def replace(self, why: str) -> None:
        """Close this producer instance and start a new one (after a fatal error)."""
        self.history.note(f"{self.writer}: new producer instance after {why}")
        self.close(CLOSE_TIMEOUT_S)
        self.instance += 1
        self.open()

    # -- per client ----------------------------------------------------------------------

    def open(self) -> None:
        raise NotImplementedError

    def send(self, event: Send) -> None:
        raise NotImplementedError

    def service(self) -> None:
        """Give the client's callbacks a turn (librdkafka's poll)."""

    def is_fatal(self, exc: Exception) -> bool:
        return False

    def close(self, timeout_s: float) -> None:
        raise NotImplementedError


class KafkaPythonWriter(Writer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.producer: KafkaProducer | None = None

    def open(self) -> None:
        self.producer = KafkaProducer(
            bootstrap_servers=self.bootstrap.split(","),
            client_id=f"chaos-{self.writer}-{self.instance}",
            acks="all" if self.acks == -1 else self.acks,
            enable_idempotence=self.idempotent,
            linger_ms=5, retry_backoff_ms=100, reconnect_backoff_max_ms=1000,
            request_timeout_ms=REQUEST_TIMEOUT_MS, delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
            max_block_ms=MAX_BLOCK_MS, metadata_max_age_ms=5000,
            max_in_flight_requests_per_connection=5)

    def send(self, event: Send) -> None:
        assert self.producer is not None
        future = self.producer.send(self.topic, value=record_value(self.writer, event.seq),
                                    key=self.writer.encode(), partition=event.partition)
        future.add_callback(lambda md: self.answered(event, offset=md.offset))
        future.add_errback(lambda exc: self.answered(event, error=repr(exc)))

    def is_fatal(self, exc: Exception) -> bool:
        # A timeout waiting for metadata or buffer space is the cluster's state; anything
        # else raised by send() means this producer instance gave up.
        return not (isinstance(exc, KafkaPythonError) and exc.__class__.__name__ ==
                    "KafkaTimeoutError")

    def close(self, timeout_s: float) -> None:
        producer, self.producer = self.producer, None
        if producer is None:
            return
        with contextlib.suppress(Exception):
            producer.flush(timeout=timeout_s)
        with contextlib.suppress(Exception):
            producer.close(timeout=CLOSE_TIMEOUT_S)


class ConfluentWriter(Writer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.producer: Producer | None = None
        self._fatal: str | None = None

    def open(self) -> None:
        self._fatal = None
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "client.id": f"chaos-{self.writer}-{self.instance}",
            "acks": "all" if self.acks == -1 else str(self.acks),
            "enable.idempotence": self.idempotent,
            "linger.ms": 5,
            "retry.backoff.ms": 100,
            "reconnect.backoff.max.ms": 1000,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            "socket.timeout.ms": REQUEST_TIMEOUT_MS,
            "topic.metadata.refresh.interval.ms": 5000,
            "error_cb": self._on_error,
            "logger": logging.getLogger(f"chaos.librdkafka.{self.writer}"),
        }
        self.producer = Producer(config)

    def _on_error(self, err: ConfluentError) -> None:
        if err.fatal():
            self._fatal = str(err)

    def send(self, event: Send) -> None:
        assert self.producer is not None

        def delivered(err: ConfluentError | None, msg: Any) -> None:
            if err is None:
                self.answered(event, offset=msg.offset())
            else:
                self.answered(event, error=str(err))

        while True:
            try:
                self.producer.produce(self.topic, value=record_value(self.writer, event.seq),
                                      key=self.writer.encode(), partition=event.partition,
                                      on_delivery=delivered)
                return
            except BufferError:  # librdkafka's queue is full: let it drain, bounded by stop
                self.producer.poll(0.05)
                if self._halt.is_set():
                    raise

    def service(self) -> None:
        if self.producer is not None:
            self.producer.poll(0)
        if self._fatal is not None:
            self.replace(f"fatal error {self._fatal}")

    def is_fatal(self, exc: Exception) -> bool:
        return isinstance(exc, ConfluentException) and self._fatal is not None

    def close(self, timeout_s: float) -> None:
        producer, self.producer = self.producer, None
        if producer is None:
            return
        with contextlib.suppress(Exception):
            producer.flush(timeout_s)
        with contextlib.suppress(Exception):
            producer.poll(0)


class GroupConsumer(threading.Thread):
    """A member of the group; commits the next offset of what each poll returned."""

    def __init__(self, name: str, history: History, bootstrap: str, topic: str,
                 group: str) -> None:
        super().__init__(name=f"consumer-{name}", daemon=True)
        self.member = name
        self.history = history
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self._halt = threading.Event()
        self.consumed = 0
        self.commit_errors = 0
        self.crashed: str | None = None

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:
            self.crashed = repr(exc)
            self.history.note(f"{self.member}: consumer stopped: {exc!r}")
            raise

    def _loop(self) -> None:
        while not self._halt.is_set():
            try:
                self._consume()
            except Exception as exc:  # the client in a state it cannot leave: a new one
                self.history.note(f"{self.member}: new consumer after {exc!r}")
                self._halt.wait(ERROR_PAUSE_S)

    def _consume(self) -> None:
        consumer = KafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap.split(","), group_id=self.group,
            client_id=f"chaos-{self.member}", enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=10_000,
            heartbeat_interval_ms=1_000, request_timeout_ms=15_000,
            max_poll_interval_ms=60_000, metadata_max_age_ms=5_000,
            reconnect_backoff_max_ms=1000, retry_backoff_ms=100)
        try:
            while not self._halt.is_set():
                try:
                    batches = consumer.poll(timeout_ms=200, max_records=500)
                except KafkaPythonError as exc:
                    self.history.note(f"{self.member}: poll: {exc!r}")
                    self._halt.wait(ERROR_PAUSE_S)
                    continue
                if not batches:
                    continue
                offsets = {tp: OffsetAndMetadata(msgs[-1].offset + 1, "", -1)
                           for tp, msgs in batches.items() if msgs}
                self.consumed += sum(len(m) for m in batches.values())
                t = self.history.now()
                try:
                    consumer.commit(offsets)
                except KafkaPythonError as exc:
                    self.commit_errors += 1
                    self.history.note(f"{self.member}: commit: {exc!r}")
                    continue
                done = self.history.now()
                for tp, meta in offsets.items():
                    self.history.commit(Commit("consumer", self.member, tp.topic,
                                               tp.partition, meta.offset, t, done))
        finally:
            with contextlib.suppress(Exception):
                consumer.close(autocommit=False)


class OffsetObserver(threading.Thread):
    """Reads the group's committed offsets every ``interval_s`` with the project's client."""

    def __init__(self, history: History, bootstrap: str, group: str,
                 interval_s: float = 0.5) -> None:
        super().__init__(name="offset-observer", daemon=True)
        self.history = history
        self.bootstrap = bootstrap
        self.group = group
        self.interval_s = interval_s
        self._halt = threading.Event()
        self.reads = 0
        self.errors = 0

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        client: SyncClient | None = None
        try:
            while not self._halt.wait(self.interval_s):
                try:
                    if client is None:
                        client = SyncClient(self.bootstrap, timeout_ms=5_000)
                    t = self.history.now()
                    offsets = client.committed_offsets(self.group)
                except Exception as exc:  # the cluster in a fault: try again next turn
                    self.errors += 1
                    log.debug("committed offsets: %s", exc)
                    continue
                done = self.history.now()
                self.reads += 1
                for tp, offset in offsets.items():
                    if offset >= 0:
                        self.history.commit(Commit("observer", "observer", tp.topic,
                                                   tp.partition, offset, t, done))
        finally:
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()


__all__ = ["ConfluentWriter", "GroupConsumer", "KafkaPythonWriter", "OffsetObserver",
           "TopicPartition", "Writer"]
