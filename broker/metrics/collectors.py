"""Scrape-time gauges: read the broker's state when Prometheus asks, never on change.

Each function below reads one part of the broker and yields metric families; they run on
the event loop (``endpoint`` hands the scrape to the loop), so they see consistent state
and need no locks. Nothing here is updated on the request path.

- network: ``RequestQueueSize``, ``ResponseQueueSize`` (no response queue: 0), and per
  listener ``connection-count`` / ``connection-creation-total`` / ``connection-close-total``
  (Kafka's ``socket-server-metrics``, with ``networkProcessor="0"``: one event loop);
- replica manager: ``PartitionCount``, ``LeaderCount``, ``UnderReplicatedPartitions``,
  ``UnderMinIsrPartitionCount``, ``AtMinIsrPartitionCount``, ``OfflineReplicaCount``,
  ``IsrShrinksPerSec`` / ``IsrExpandsPerSec``; ``ReplicaFetcherManager`` ``MaxLag``
  (``clientId="Replica"``); per partition (``kafka.cluster`` Partition)
  ``UnderReplicated``, ``UnderMinIsr``, ``AtMinIsr``, ``InSyncReplicasCount``,
  ``ReplicasCount``; purgatory sizes (``DelayedOperationPurgatory`` Produce, Fetch,
  Rebalance);
- logs (``kafka.log`` Log): ``Size``, ``NumLogSegments``, ``LogEndOffset``,
  ``LogStartOffset`` per partition; ``LogFlushRateAndTimeMs`` (storage's flush timer);
- log cleaner (``LogCleaner``, ``LogCleanerManager``): buffer utilization, recopy percent
  and time of the last cleaning, dead threads, max dirty percent, time since the last
  run, uncleanable partitions; totals of cleanings, bytes read and written and worker
  restarts;
- controller (``KafkaController``): ``ActiveControllerCount``, ``ControllerState``,
  ``OfflinePartitionsCount``, ``PreferredReplicaImbalanceCount``, ``GlobalTopicCount``,
  ``GlobalPartitionCount``, from the controller's own view of the cluster
  (``view.ControllerView``; the counts are 0 on a broker whose controller is not active, as
  Kafka's); ``ControllerStats``: ``LeaderElectionRateAndTimeMs`` (a histogram), the
  other states' rate-and-time timers (``TopicChangeRateAndTimeMs``, ..., histograms, for
  the states processed at least once) and ``UncleanLeaderElectionsPerSec``, counted since
  start-up over every tenure;
- groups (``GroupMetadataManager``): ``NumGroups``, ``NumGroups<State>``, ``NumOffsets``;
  consumer lag per group and partition (``kafka_consumergroup_lag``, the name
  kafka_exporter gives it: Kafka has no broker-side lag metric).

A partition's replicas and role are the ones its last LeaderAndIsr gave it
(``Partition.replicas``, ``Partition.is_leader``); the per-partition replication gauges count
on leaders only, as Kafka's do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from broker.group.state import GroupState
from broker.metrics.histogram import add_histogram, le_labels
from broker.metrics.view import BrokerView
from controller.stats import LEADER_ELECTION_BOUNDS_NS, RATE_AND_TIME_NAMES
from storage.flush_stats import BOUNDS_NS as FLUSH_BOUNDS_NS
from storage.flush_stats import LOG_FLUSH_STATS

if TYPE_CHECKING:
    from broker.partition import Partition


_FLUSH_LE = le_labels(FLUSH_BOUNDS_NS, 1_000_000)
_ELECTION_LE = le_labels(LEADER_ELECTION_BOUNDS_NS, 1_000_000)


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=value)


def collect_network(view: BrokerView) -> Iterator[Metric]:
    server = view.socket_server
    yield _gauge("kafka_network_requestchannel_requestqueuesize",
                 "Requests waiting for an IO worker (Kafka: RequestChannel RequestQueueSize)",
                 server.request_queue_size)
    yield _gauge("kafka_network_requestchannel_responsequeuesize",
                 "Responses waiting for a network thread: none here, responses are written "
                 "by the handler's task (Kafka: RequestChannel ResponseQueueSize)", 0)
    labels = ["listener", "networkProcessor"]
    count = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                              "Open connections (Kafka: socket-server-metrics connection-count)",
                              labels=labels)
    created = CounterMetricFamily(
        "kafka_server_socket_server_metrics_connection_creation",
        "Connections accepted (Kafka: socket-server-metrics connection-creation-total)",
        labels=labels)
    closed = CounterMetricFamily(
        "kafka_server_socket_server_metrics_connection_close",
        "Connections closed (Kafka: socket-server-metrics connection-close-total)",
        labels=labels)
    for listener, stats in sorted(server.listener_stats.items()):
        values = [listener, "0"]
        count.add_metric(values, stats.created - stats.closed)
        created.add_metric(values, stats.created)
        closed.add_metric(values, stats.closed)
    yield count
    yield created
    yield closed


def _replicas(p: Partition) -> int:
    return len(p.replicas)


def _is_leader(p: Partition) -> bool:
    return p.is_leader


def collect_replicas(view: BrokerView) -> Iterator[Metric]:
    rm = view.replica_manager
    partitions = sorted(rm.partitions.items())
    labels = ["topic", "partition"]
    under = GaugeMetricFamily("kafka_cluster_partition_underreplicated",
                              "1 if the partition has fewer in-sync replicas than replicas "
                              "(Kafka: Partition UnderReplicated)", labels=labels)
    under_min = GaugeMetricFamily("kafka_cluster_partition_underminisr",
                                  "1 if the ISR is smaller than min.insync.replicas "
                                  "(Kafka: Partition UnderMinIsr)", labels=labels)
    at_min = GaugeMetricFamily("kafka_cluster_partition_atminisr",
                               "1 if the ISR size equals min.insync.replicas "
                               "(Kafka: Partition AtMinIsr)", labels=labels)
    isr_count = GaugeMetricFamily("kafka_cluster_partition_insyncreplicascount",
                                  "In-sync replicas (Kafka: Partition InSyncReplicasCount)",
                                  labels=labels)
    replicas_count = GaugeMetricFamily("kafka_cluster_partition_replicascount",
                                       "Replicas (Kafka: Partition ReplicasCount)", labels=labels)
    totals = {"under": 0, "under_min": 0, "at_min": 0, "leaders": 0}
    for (topic, index), p in partitions:
        values = [topic, str(index)]
        isr = len(p.isr)
        replicas = _replicas(p)
        leader = _is_leader(p)
        is_under = leader and isr < replicas
        is_under_min = leader and isr < p.min_insync_replicas
        is_at_min = leader and isr == p.min_insync_replicas
        totals["under"] += is_under
        totals["under_min"] += is_under_min
        totals["at_min"] += is_at_min
        totals["leaders"] += leader
        under.add_metric(values, int(is_under))
        under_min.add_metric(values, int(is_under_min))
        at_min.add_metric(values, int(is_at_min))
        isr_count.add_metric(values, isr)
        replicas_count.add_metric(values, replicas)
    yield from (under, under_min, at_min, isr_count, replicas_count)
    yield _gauge("kafka_server_replicamanager_partitioncount",
                 "Partitions hosted here (Kafka: ReplicaManager PartitionCount)", len(partitions))
    yield _gauge("kafka_server_replicamanager_leadercount",
                 "Partitions led here (Kafka: ReplicaManager LeaderCount)", totals["leaders"])
    yield _gauge("kafka_server_replicamanager_underreplicatedpartitions",
                 "Led partitions with fewer in-sync replicas than replicas "
                 "(Kafka: ReplicaManager UnderReplicatedPartitions)", totals["under"])
    yield _gauge("kafka_server_replicamanager_underminisrpartitioncount",
                 "Led partitions whose ISR is below min.insync.replicas "
                 "(Kafka: ReplicaManager UnderMinIsrPartitionCount)", totals["under_min"])
    yield _gauge("kafka_server_replicamanager_atminisrpartitioncount",
                 "Led partitions whose ISR is at min.insync.replicas "
                 "(Kafka: ReplicaManager AtMinIsrPartitionCount)", totals["at_min"])
    yield _gauge("kafka_server_replicamanager_offlinereplicacount",
                 "Replicas hosted here that are offline: in a failed log dir (Kafka: "
                 "ReplicaManager OfflineReplicaCount)",
                 len(rm.offline_partitions) + sum(1 for _, p in partitions if p.log.offline))
    max_lag = GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag",
                                "Largest lag of a partition this broker follows, messages "
                                "(Kafka: ReplicaFetcherManager MaxLag)", labels=["clientId"])
    max_lag.add_metric(["Replica"], rm.fetchers.max_lag())
    yield max_lag
    shrinks = CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                                  "ISR shrinks (Kafka: ReplicaManager IsrShrinksPerSec)")
    shrinks.add_metric([], rm.isr_shrinks)
    expands = CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                                  "ISR expansions (Kafka: ReplicaManager IsrExpandsPerSec)")
    expands.add_metric([], rm.isr_expands)
    yield shrinks
    yield expands
    yield from _purgatories(view)


def _purgatories(view: BrokerView) -> Iterator[Metric]:
    rm = view.replica_manager
    join_ops = len(view.groups.coordinator.join_purgatory)
    # (delayedOperation, watched entries over all keys, operations)
    rows = [
        ("Produce", rm.produce_purgatory.watched_entries, len(rm.produce_purgatory)),
        ("Fetch", rm.fetch_purgatory.watched_entries, len(rm.fetch_purgatory)),
        ("Rebalance", join_ops, join_ops),
    ]
    size = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                             "Operations watched, counted once per key (Kafka: "
                             "DelayedOperationPurgatory PurgatorySize)", labels=["delayedOperation"])
    ops = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_numdelayedoperations",
                            "Delayed operations waiting (Kafka: DelayedOperationPurgatory "
                            "NumDelayedOperations)", labels=["delayedOperation"])
    for name, entries, count in rows:
        size.add_metric([name], entries)
        ops.add_metric([name], count)
    yield size
    yield ops


def collect_logs(view: BrokerView) -> Iterator[Metric]:
    labels = ["topic", "partition"]
    size = GaugeMetricFamily("kafka_log_log_size", "Log size, bytes (Kafka: Log Size)",
                             labels=labels)
    segments = GaugeMetricFamily("kafka_log_log_numlogsegments",
                                 "Segments (Kafka: Log NumLogSegments)", labels=labels)
    end = GaugeMetricFamily("kafka_log_log_logendoffset",
                            "Log end offset (Kafka: Log LogEndOffset)", labels=labels)
    start = GaugeMetricFamily("kafka_log_log_logstartoffset",
                              "Log start offset (Kafka: Log LogStartOffset)", labels=labels)
    for (topic, index), p in sorted(view.replica_manager.partitions.items()):
        values = [topic, str(index)]
        plog = p.log
        size.add_metric(values, plog.size_bytes)
        segments.add_metric(values, len(plog.segment_base_offsets))
        end.add_metric(values, int(plog.log_end_offset))
        start.add_metric(values, int(plog.log_start_offset))
    yield from (size, segments, end, start)
    counts, sum_ns = LOG_FLUSH_STATS.snapshot()
    flush = HistogramMetricFamily("kafka_log_logflushstats_logflushrateandtimems",
                                  "Log flush times, ms (Kafka: LogFlushStats "
                                  "LogFlushRateAndTimeMs)", labels=[])
    add_histogram(flush, [], _FLUSH_LE, counts, sum_ns / 1_000_000)
    yield flush


def collect_cleaner(view: BrokerView) -> Iterator[Metric]:
    """Kafka's LogCleaner and LogCleanerManager gauges (from the last cleaning and the last
    choice), plus totals of what the cleaner read and wrote since start-up."""
    cleaner = view.replica_manager.log_manager.cleaner
    if cleaner is None:
        return
    totals = cleaner.totals
    last = totals.last
    manager = cleaner.manager
    yield _gauge("kafka_log_logcleaner_max_buffer_utilization_percent",
                 "Offset map use in the last cleaning, % (Kafka: LogCleaner "
                 "max-buffer-utilization-percent)",
                 100 * last.buffer_utilization if last else 0.0)
    yield _gauge("kafka_log_logcleaner_cleaner_recopy_percent",
                 "Bytes written / bytes read by the last cleaning, % (Kafka: LogCleaner "
                 "cleaner-recopy-percent)",
                 100 * last.bytes_written / max(last.bytes_read, 1) if last else 0.0)
    yield _gauge("kafka_log_logcleaner_max_clean_time_secs",
                 "Duration of the last cleaning, s (Kafka: LogCleaner max-clean-time-secs)",
                 last.elapsed_s if last else 0.0)
    yield _gauge("kafka_log_logcleaner_deadthreadcount",
                 "Cleaner threads that died (Kafka: LogCleaner DeadThreadCount)",
                 cleaner.dead_thread_count)
    yield _gauge("kafka_log_logcleanermanager_max_dirty_percent",
                 "Dirty ratio of the dirtiest log at the last choice, % (Kafka: "
                 "LogCleanerManager max-dirty-percent)", 100 * manager.max_dirty_ratio)
    yield _gauge("kafka_log_logcleanermanager_time_since_last_run_ms",
                 "Since a cleaner thread last looked for work, ms (Kafka: LogCleanerManager "
                 "time-since-last-run-ms)",
                 max(0, int(time.time() * 1000) - manager.last_run_ms))
    yield _gauge("kafka_log_logcleanermanager_uncleanable_partitions_count",
                 "Partitions a cleaning failed on (Kafka: LogCleanerManager "
                 "uncleanable-partitions-count)", manager.uncleanable_count)
    for name, help_text, value in (
        ("cleanings", "Cleanings completed", totals.cleanings),
        ("read_bytes", "Bytes of log the cleanings read", totals.bytes_read),
        ("written_bytes", "Bytes the cleanings wrote", totals.bytes_written),
        ("worker_restarts", "Cleaner worker processes started again after one died",
         totals.worker_restarts),
    ):
        yield CounterMetricFamily(f"kafka_log_logcleaner_{name}", help_text + " (minikafka)",
                                  value=value)


def collect_controller(view: BrokerView) -> Iterator[Metric]:
    controller = view.controller
    yield _gauge("kafka_controller_kafkacontroller_activecontrollercount",
                 "1 on the active controller (Kafka: KafkaController ActiveControllerCount)",
                 int(controller.is_active))
    yield _gauge("kafka_controller_kafkacontroller_controllerstate",
                 "Controller state, Kafka's ControllerState values (0 Idle) "
                 "(Kafka: KafkaController ControllerState)", controller.state)
    active = controller.is_active
    yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
                 "Partitions without a leader (Kafka: KafkaController OfflinePartitionsCount)",
                 controller.offline_partitions_count if active else 0)
    yield _gauge("kafka_controller_kafkacontroller_globaltopiccount",
                 "Topics (Kafka: KafkaController GlobalTopicCount)",
                 controller.global_topic_count if active else 0)
    yield _gauge("kafka_controller_kafkacontroller_globalpartitioncount",
                 "Partitions (Kafka: KafkaController GlobalPartitionCount)",
                 controller.global_partition_count if active else 0)
    yield _gauge("kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
                 "Partitions not led by their preferred replica (Kafka: KafkaController "
                 "PreferredReplicaImbalanceCount)",
                 controller.preferred_replica_imbalance_count if active else 0)
    stats = controller.stats
    elections = HistogramMetricFamily(
        "kafka_controller_controllerstats_leaderelectionrateandtimems",
        "Time the controller spent handling broker changes (electing leaders), ms "
        "(Kafka: ControllerStats LeaderElectionRateAndTimeMs)", labels=[])
    add_histogram(elections, [], _ELECTION_LE, stats.leader_election_counts,
                  stats.leader_election_sum_ns / 1_000_000)
    yield elections
    for state, timer in sorted(stats.state_times.items()):
        name = RATE_AND_TIME_NAMES[state]
        family = HistogramMetricFamily(
            f"kafka_controller_controllerstats_{name.lower()}",
            f"Time the controller spent in state {state.name}, ms (Kafka: ControllerStats "
            f"{name})", labels=[])
        add_histogram(family, [], _ELECTION_LE, timer.counts, timer.sum_ns / 1_000_000)
        yield family
    yield CounterMetricFamily("kafka_controller_controllerstats_uncleanleaderelections",
                              "Leaders elected from outside the ISR (Kafka: ControllerStats "
                              "UncleanLeaderElectionsPerSec)",
                              value=stats.unclean_leader_elections)


_GROUP_STATE_METRICS = (
    (GroupState.PREPARING_REBALANCE, "NumGroupsPreparingRebalance"),
    (GroupState.COMPLETING_REBALANCE, "NumGroupsCompletingRebalance"),
    (GroupState.STABLE, "NumGroupsStable"),
    (GroupState.DEAD, "NumGroupsDead"),
    (GroupState.EMPTY, "NumGroupsEmpty"),
)


def collect_groups(view: BrokerView) -> Iterator[Metric]:
    groups = list(view.groups.coordinator.manager.groups.values())
    yield _gauge("kafka_coordinator_group_groupmetadatamanager_numgroups",
                 "Groups this coordinator owns (Kafka: GroupMetadataManager NumGroups)",
                 len(groups))
    for state, name in _GROUP_STATE_METRICS:
        yield _gauge(f"kafka_coordinator_group_groupmetadatamanager_{name.lower()}",
                     f"Groups in state {state.value} (Kafka: GroupMetadataManager {name})",
                     sum(1 for g in groups if g.state is state))
    yield _gauge("kafka_coordinator_group_groupmetadatamanager_numoffsets",
                 "Committed offsets held (Kafka: GroupMetadataManager NumOffsets)",
                 sum(len(g.offsets) for g in groups))
    lag = GaugeMetricFamily("kafka_consumergroup_lag",
                            "High watermark minus the group's committed offset",
                            labels=["consumergroup", "topic", "partition"])
    rm = view.replica_manager
    for group in sorted(groups, key=lambda g: g.group_id):
        for (topic, index), committed in sorted(group.offsets.items()):
            p = rm.get_partition(topic, index)
            if p is not None:
                lag.add_metric([group.group_id, topic, str(index)],
                               max(0, p.high_watermark - committed.offset))
    yield lag


COLLECTORS: tuple[Callable[[BrokerView], Iterable[Metric]], ...] = (
    collect_network, collect_replicas, collect_logs, collect_cleaner, collect_controller,
    collect_groups,
)
