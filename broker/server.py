"""Start-up and ordered shutdown of one broker (Kafka's ``KafkaServer.startup``/``shutdown``).

Start-up, in order:

1. bind the listeners (port 0 binds an ephemeral port); nothing is accepted yet;
2. load the topic store (``controller.local_store``) and the topics' configs, then the log
   manager: it locks every log dir (``.lock``, flock: a second broker on the same dir fails
   start-up, as in Kafka), loads and recovers every partition log, in a worker thread
   (``num.recovery.threads.per.data.dir`` threads a dir) while the event loop runs on; as
   in Kafka, no request is served before (the listeners accept nothing yet); ``meta.properties``
   keeps the cluster id (created on first start) and must name this broker.id. A log dir
   the disk fails while loading goes offline; start-up fails only when every one did;
3. build the services (metadata cache, replica manager, admin manager, group coordinator,
   control-request handler) and start the single node's controller
   (``controller.local``): it sends this broker UpdateMetadata and LeaderAndIsr for every
   partition, which is how the partitions come to be hosted (and ``__consumer_offsets``
   groups loaded); start-up waits for them. A partition whose log dir is offline is not
   recreated elsewhere: it answers KAFKA_STORAGE_ERROR;
4. start the network (IO workers, acceptors), the periodic log work (retention, flush,
   checkpoints: broker.log_maintenance) and the log cleaner's threads
   (broker.log_cleaning). A line ``minikafka: started broker N listening on
   NAME://host:port`` goes to stdout (tests and scripts wait for it).

Nothing is process-global: several ``BrokerServer``s (separate log dirs and ports) run in
one interpreter, on one event loop, side by side (``install_signal_handlers=False``).

Shutdown (SIGTERM or SIGINT), in order, bounded by ``SHUTDOWN_TIMEOUT_S``:

1. stop accepting (close the listening sockets);
2. let every connection finish its in-flight request (at most ``DRAIN_TIMEOUT_S``), then
   close them, cancelling what is left;
3. stop the controller, the replica manager (completes parked operations) and the
   periodic log work;
4. stop the log cleaner (a running cleaning stops at its next chunk), flush and close every
   log, write the checkpoints and the clean-shutdown marker, release the lock
   (LogManager.shutdown); exit 0. A second signal exits at once (1).

Log dir failures (``storage.log_dir_failure``): the server listens on the log manager's
``failure_channel``. A failed dir's partitions answer KAFKA_STORAGE_ERROR and their parked
requests are answered at once (``ReplicaManager.handle_log_dir_failure``); when no log dir
is left the broker stops (the ordered shutdown above, exit code 1) with a line saying why,
as Kafka halts. In a cluster the ZooKeeper controller is told by subscribing to the same
channel: each ``LogDirFailure`` becomes a ``/log_dir_event_notification`` znode
(``ZkController.propagate_log_dir_event``, Kafka's ``propagateLogDirEvent``; retried
``LOG_DIR_EVENT_TRIES`` times while ZooKeeper fails), and the controller moves the
leadership of the partitions there.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from typing import IO, TYPE_CHECKING

from broker import allocator, heap
from broker.admin_manager import AdminManager
from broker.cluster_ops import ClusterOps, LocalClusterOps
from broker.config import BrokerConfig, ConfigError, Endpoint
from broker.control_requests import ControlRequestHandler
from broker.dynamic_broker_config import NUM_IO_THREADS, DynamicBrokerConfig
from broker.group.partitioning import GROUP_METADATA_TOPIC
from broker.group.service import GroupService
from broker.log_cleaning import (
    CleanerReconfigurer,
    cleaner_config,
    partition_states_from_loop,
)
from broker.log_configs import LogConfigs
from broker.log_maintenance import LogMaintenance
from broker.metadata_cache import MetadataCache
from broker.metrics.service import LISTENER_PROPERTY, BrokerMetrics
from broker.metrics.view import BrokerState, BrokerView
from broker.network.socket_server import SocketServer
from broker.produce_appends import ProduceAppends
from broker.producer_ids import BLOCK_FILE_NAME, BlockSource, ProducerIdManager
from broker.quota.manager import ClientQuotas
from broker.replica_manager import ReplicaManager
from broker.replication_quota import apply_throttle_rates
from broker.security.acl_store import STORE_FILE as ACL_FILE
from broker.security.acl_store import AclStore
from broker.security.authorizer import AclAuthorizer, parse_super_users
from broker.security.credentials import CredentialStore
from broker.security.entity_store import STORE_FILE as ENTITY_CONFIGS_FILE
from broker.security.stores import SecurityStoreError, SecurityStores, open_security_stores
from broker.services import Broker, advertised_host
from controller.channel import BrokerEndpoint, BrokerRegistration
from controller.local import InProcessChannel, LocalController
from controller.local_broker_configs import STORE_FILE as BROKER_CONFIGS_FILE
from controller.local_broker_configs import LocalBrokerConfigStore
from controller.local_store import STORE_FILE as TOPICS_FILE
from controller.local_store import LocalTopicStore, TopicStoreLoadError
from controller.topic_store import TopicStore
from protocol import native
from storage import fileio
from storage.errors import StorageError
from storage.log_dir_failure import LogDirFailure
from storage.manager import LogDirInUseError, LogManager

if TYPE_CHECKING:
    # Tests of an in-process broker only (never configured): not loaded by a broker process.
    from broker.faults import FaultInjector

    # A cluster only: broker.cluster_mode and the ZooKeeper controller (kazoo) are imported
    # when zookeeper.connect is set, so a single node's start-up does not load them.
    from controller.zk import ZkController

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 10.0
LOG_DIR_EVENT_TRIES = 10  # writing a /log_dir_event_notification znode, ZooKeeper failing
LOG_DIR_EVENT_BACKOFF_S = 1.0
# Kafka's SecurityProtocol ids, as a broker registration carries them.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
# Tests only: while the file this names exists, start-up waits before loading the logs
# (state RECOVERY, /ready answers 503), at most PAUSE_MAX_S.
PAUSE_ENV = "MINIKAFKA_TEST_PAUSE_BEFORE_LOG_LOADING"
PAUSE_MAX_S = 60.0
# Tests only: a storage.fileio fault plan ("op=write,errno=EIO,times=0,path=/d2") applied
# at start-up, so a test can make one log dir fail in a real broker process.
FAULT_ENV = "MINIKAFKA_TEST_FAULT_INJECTION"


class StartupError(RuntimeError):
    """The broker cannot start: log dir locked or inconsistent, listener cannot bind, ..."""


def new_cluster_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


class BrokerServer:
    def __init__(self, config: BrokerConfig, *, ready_stream: IO[str] | None = None,
                 install_signal_handlers: bool = True,
                 faults: FaultInjector | None = None) -> None:
        self.config = config
        self._ready_stream = ready_stream
        self._install_signal_handlers = install_signal_handlers
        self._stop = asyncio.Event()
        self._signals = 0
        self._started = asyncio.Event()
        self.metrics = BrokerMetrics(str(config.values[LISTENER_PROPERTY] or ""))
        # Faults (broker.faults) only from Python code in this process: never configured.
        self.network = SocketServer(config, request_metrics=self.metrics.requests, faults=faults)
        self.broker: Broker | None = None
        self.controller: LocalController | ZkController | None = None
        self._zk: ZkController | None = None  # self.controller, in a cluster
        self._control: ControlRequestHandler | None = None  # in a cluster
        self._maintenance: LogMaintenance | None = None
        self._log_manager: LogManager | None = None
        # The log cleaner's side of the dynamic broker configs (its restarts).
        self._cleaner_reconfigurer = CleanerReconfigurer(config)
        self._security: SecurityStores | None = None
        self._logs_closed = False
        self._exit_code = 0
        self._log_dir_events: set[asyncio.Task[None]] = set()  # notifications being written

    def request_stop(self, signum: int | None = None) -> None:
        self._signals += 1
        if self._signals > 1 and signum is not None:
            log.error("Second signal during shutdown: exiting at once")
            os._exit(1)
        if signum is not None:
            log.info("Received %s: shutting down", signal.Signals(signum).name)
        self.metrics.set_state(BrokerState.SHUTTING_DOWN)
        self._stop.set()

    async def wait_started(self) -> Broker:
        """Wait until the broker serves requests (for brokers run in process)."""
        await self._started.wait()
        assert self.broker is not None
        return self.broker

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        if self._install_signal_handlers:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, self.request_stop, signum)
        try:
            self.metrics.start_endpoint(self._ready_stream)
        except OSError as exc:
            raise StartupError(f"cannot bind {LISTENER_PROPERTY} "
                               f"{self.config.values[LISTENER_PROPERTY]}: {exc}") from None
        try:
            return await self._run()
        finally:
            await self.metrics.stop()

    async def _run(self) -> int:
        loop = asyncio.get_running_loop()
        cleaning = cleaner_config(self.config)  # a bad log.cleaner.* value stops start-up here
        try:
            bound = self.network.bind()
        except OSError as exc:
            raise StartupError(f"cannot bind listeners {list(map(str, self.config.listeners))}: {exc}") from None
        try:
            self.broker = await self._build_services(bound)
            assert self._maintenance is not None
            self.network.start(self.broker)
            if self._zk is not None:
                from broker import cluster_mode
                await cluster_mode.wait_for_metadata(
                    self.broker.metadata_cache, self.broker.control, self.broker.broker_id)
            endpoints = ",".join(str(e) for e in self.broker.advertised_listeners)
            log.info("Request path: %s", native.BUILD)
            log.info("[KafkaServer id=%d] started (cluster id %s, listening on %s)",
                     self.broker.broker_id, self.broker.cluster_id, endpoints)
            assert self.controller is not None
            self.metrics.serve(BrokerView(
                socket_server=self.network, replica_manager=self.broker.replica_manager,
                groups=self.broker.group_coordinator, controller=self.controller),
                self._readiness())
            if self._ready_stream is not None:
                print(f"minikafka: started broker {self.broker.broker_id} listening on "
                      f"{endpoints}", file=self._ready_stream, flush=True)
            self._maintenance.start()
            dynamic = self.broker.admin.dynamic_broker_config
            if dynamic is not None:  # the cleaner starts with the dynamic settings in force
                cleaning = self._cleaner_reconfigurer.initial(dynamic.cleaner_values())
            self._cleaner_reconfigurer.attach(self.broker.log_manager.start_cleaner(
                cleaning, partition_states_from_loop(loop, self.broker.replica_manager)))
            # What start-up made (modules, configuration, the partitions it opened) lives as
            # long as the broker: out of later full garbage collections (broker.heap).
            heap.freeze()
            self._started.set()
            await self._stop.wait()
            await asyncio.wait_for(self._shutdown(), SHUTDOWN_TIMEOUT_S)
        except BaseException:
            # Start-up or shutdown failed half-way: release the log dir without pretending
            # to have shut down cleanly (the next start recovers).
            if self._security is not None:
                await asyncio.shield(self._security.close())
            if self.controller is not None:
                await asyncio.shield(self.controller.shutdown())
            if self._log_manager is not None and not self._logs_closed:
                self._log_manager.abandon()
            # The listening sockets too: in a process that lives on (brokers run in
            # process), the port is free again at once, as after the process's exit.
            self.network.stop_accepting()
            await self.network.close()
            raise
        log.info("[KafkaServer id=%d] shut down completed", self.config.broker_id)
        return self._exit_code

    def _readiness(self) -> Callable[[], str | None] | None:
        """In a cluster, what ``/ready`` checks besides the broker state."""
        zk, control, broker = self._zk, self._control, self.broker
        if zk is None or control is None or broker is None:
            return None
        from broker import cluster_mode
        return partial(cluster_mode.not_ready_reason, zk, control,
                                 broker.metadata_cache, broker.broker_id)

    async def _build_services(self, bound: list[Endpoint]) -> Broker:
        config = self.config
        log_dir = config.log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        # Bound ports replace port 0 when advertised.listeners is not set.
        # A listener missing from advertised.listeners is advertised as bound.
        advertised = list(config.advertised_listeners if "advertised.listeners" in config.explicit
                          else bound)
        advertised += [b for b in bound
                       if all(a.listener_name != b.listener_name for a in advertised)]
        zk: ZkController | None = None
        zk_cluster_id: str | None = None
        store: TopicStore
        if config.zookeeper_connect is not None:
            from broker import cluster_mode
            # A cluster: ZooKeeper first (the cluster id, the topic store), as Kafka starts.
            zk = cluster_mode.zk_controller(config, lambda: [
                (Endpoint(e.listener_name, advertised_host(e), e.port),
                 config.security_protocol(e.listener_name)) for e in advertised])
            self.controller = self._zk = zk
            try:
                zk_cluster_id = await cluster_mode.connect(zk, new_cluster_id())
            except cluster_mode.ClusterStartupError as exc:
                raise StartupError(str(exc)) from None
            store = zk.store
        else:
            # Topic configs first: the log manager opens each log with its topic's LogConfig.
            try:
                # Read and parsed in a worker thread: the file lists every partition.
                store = await asyncio.to_thread(LocalTopicStore.load, log_dir, config.broker_id)
            except TopicStoreLoadError as exc:
                raise StartupError(str(exc)) from None
        log_configs = LogConfigs(config, store)
        await log_configs.load()
        log_manager = LogManager(config.log_dirs or (log_dir,), config_for=log_configs.get,
                                 retention_check_interval_ms=config.get_int(
                                     "log.retention.check.interval.ms"),
                                 broker_files=(TOPICS_FILE, BLOCK_FILE_NAME, ACL_FILE,
                                               ENTITY_CONFIGS_FILE, BROKER_CONFIGS_FILE),
                                 recovery_threads_per_dir=config.get_int(
                                     "num.recovery.threads.per.data.dir"))
        self.metrics.set_state(BrokerState.RECOVERY)

        def load_logs() -> None:
            _test_pause()
            log_manager.startup()

        try:
            # Locks the dirs, loads and recovers every partition log (num.recovery.threads.
            # per.data.dir threads a dir): in a worker thread, so the event loop runs on (a
            # few ms at most) however long it takes. The listeners are bound but accept
            # nothing yet: as in Kafka, no request is served before the logs are loaded.
            loading = asyncio.ensure_future(asyncio.to_thread(load_logs))
            try:
                await asyncio.shield(loading)
            except asyncio.CancelledError:  # the thread runs on: release what it opens
                with contextlib.suppress(Exception):
                    await loading
                log_manager.abandon()
                raise
        except LogDirInUseError as exc:
            raise StartupError(f"Failed to acquire lock on file .lock: {exc}") from None
        except StorageError as exc:
            raise StartupError(f"cannot load the logs: {exc}") from None
        self._log_manager = log_manager
        try:
            if zk_cluster_id is not None:
                from broker import cluster_mode
                # In a cluster /cluster/id rules; meta.properties must name the same cluster.
                try:
                    cluster_mode.check_cluster_id(zk_cluster_id, log_manager.cluster_id(),
                                                  config.log_dirs or (log_dir,))
                except cluster_mode.ClusterStartupError as exc:
                    raise StartupError(str(exc)) from None
                cluster_id = zk_cluster_id
            else:
                cluster_id = log_manager.cluster_id() or new_cluster_id()
            log_manager.ensure_meta_properties(config.broker_id, cluster_id)
        except StorageError as exc:
            raise StartupError(str(exc)) from None
        metadata_cache = MetadataCache(config.broker_id)
        replica_manager = ReplicaManager(
            log_manager, metadata_cache, broker_id=config.broker_id, log_config=log_configs.fetch,
            fetch_session_cache_slots=config.get_int("max.incremental.fetch.session.cache.slots"),
            producer_id_expiration_ms=config.get_int("producer.id.expiration.ms"),
            producer_id_expiration_check_interval_ms=config.get_int(
                "producer.id.expiration.check.interval.ms"))
        replica_manager.topic_stats = self.metrics.topic_stats
        log_configs.on_change = replica_manager.update_log_config
        store.watch(log_configs)
        admin = AdminManager(config=config, store=store, metadata_cache=metadata_cache,
                             log_configs=log_configs)
        groups = GroupService(config, replica_manager, metadata_cache, admin)
        loop = asyncio.get_running_loop()

        def on_failure(failure: LogDirFailure) -> None:  # any thread: hand it to the loop
            loop.call_soon_threadsafe(self._log_dir_failed, failure)

        log_manager.failure_channel.subscribe(on_failure)
        offsets_topic = (await store.topics([GROUP_METADATA_TOPIC])).get(GROUP_METADATA_TOPIC)
        cluster: ClusterOps
        if zk is not None:
            from broker import cluster_mode, replication
            from controller.zk_client import ZkError
            # The broker epoch is the registration's czxid (a new one after a session
            # expiry); the controller then tells this broker its partitions and the cluster.
            try:
                broker_epoch = await cluster_mode.register(zk)
            except cluster_mode.ClusterStartupError as exc:
                raise StartupError(str(exc)) from None
            control = ControlRequestHandler(replica_manager=replica_manager, admin=admin,
                                            groups=groups, broker_epoch=broker_epoch)
            zk.session.on_registered = lambda epoch: setattr(control, "broker_epoch", epoch)
            self._control = control
            replication.start(config, replica_manager, metadata_cache,
                              lambda: control.broker_epoch)
            # Dynamic configs from /config/brokers/<id> and /config/brokers/<default>, followed.
            dynamic = DynamicBrokerConfig(
                config, zk.store, partial(self._apply_dynamic_configs, replica_manager),
                partial(self._apply_log_defaults, log_configs, log_manager),
                self._cleaner_reconfigurer)
            try:
                await dynamic.start()
            except ZkError as exc:
                raise StartupError(f"cannot read this broker's dynamic configs: {exc}") from None
            admin.dynamic_broker_config = dynamic
            cluster = zk
            groups.startup(None if offsets_topic is None else offsets_topic.num_partitions)
            try:
                await cluster_mode.elect(zk)
            except cluster_mode.ClusterStartupError as exc:
                raise StartupError(str(exc)) from None
        else:
            # The broker epoch: the start time, so a later start always has a higher one.
            broker_epoch = int(time.time() * 1000)
            control = ControlRequestHandler(replica_manager=replica_manager, admin=admin,
                                            groups=groups, broker_epoch=broker_epoch)
            rack = config.values.get("broker.rack")
            registration = BrokerRegistration(
                config.broker_id,
                tuple(BrokerEndpoint(e.listener_name, advertised_host(e), e.port,
                                     SECURITY_PROTOCOL_IDS[config.security_protocol(e.listener_name)])
                      for e in advertised),
                rack if isinstance(rack, str) and rack else None, broker_epoch)
            channel = InProcessChannel()
            channel.register_handler(config.broker_id, control.handle)
            local = LocalController(
                broker=registration, store=store, channel=channel,
                inter_broker_listener=config.inter_broker_listener_name,
                unclean_leader_election=config.get_bool("unclean.leader.election.enable"))
            self.controller = local
            cluster = LocalClusterOps(config.broker_id, broker_epoch, metadata_cache)
            # Dynamic configs (this broker's and the defaults) from a file in the log dir.
            try:
                broker_configs = LocalBrokerConfigStore.load(log_dir)
            except TopicStoreLoadError as exc:
                raise StartupError(str(exc)) from None
            dynamic = DynamicBrokerConfig(
                config, broker_configs, partial(self._apply_dynamic_configs, replica_manager),
                partial(self._apply_log_defaults, log_configs, log_manager),
                self._cleaner_reconfigurer)
            await dynamic.start()
            admin.dynamic_broker_config = dynamic
            groups.startup(None if offsets_topic is None else offsets_topic.num_partitions)
            # The controller tells this broker its partitions (LeaderAndIsr) and the cluster
            # (UpdateMetadata); start-up waits for both before serving.
            await local.startup()
        self._maintenance = LogMaintenance(config, log_manager, replica_manager.high_watermarks)
        claim_block: BlockSource | None = None  # a single node: blocks from its log dir
        if zk is not None:
            from controller.zk_producer_ids import claim_block_of_session
            claim_block = partial(claim_block_of_session, zk.session, config.broker_id)
        producer_ids = ProducerIdManager(log_dir, claim_block=claim_block)
        try:
            # A cluster's users, quotas and ACLs are in ZooKeeper (Kafka's znodes), shared by
            # every broker; a single node's in its log dir.
            self._security = await open_security_stores(
                log_dir, None if zk is None else zk.session.zk,
                with_acls=bool(config.values["authorizer.class.name"]))
            entity_configs = self._security.entity_configs
            authorizer = build_authorizer(config, self._security.acls)
        except (SecurityStoreError, ConfigError) as exc:
            raise StartupError(str(exc)) from None
        return Broker(
            config=config, cluster_id=cluster_id, log_manager=log_manager,
            metadata_cache=metadata_cache, replica_manager=replica_manager, admin=admin,
            group_coordinator=groups, control=control, producer_ids=producer_ids,
            started_at_ms=int(time.time() * 1000), credentials=CredentialStore(entity_configs),
            authorizer=authorizer,
            quotas=ClientQuotas.create(entity_configs, config.get_int("quota.window.num"),
                                       config.get_int("quota.window.size.seconds")),
            advertised_listeners=advertised, cluster=cluster,
            produce_appends=ProduceAppends(replica_manager),
        )

    def _apply_dynamic_configs(self, replica_manager: ReplicaManager,
                               values: Mapping[str, int]) -> None:
        """The dynamic broker configs in force now (broker.dynamic_broker_config)."""
        apply_throttle_rates(self.config, replica_manager, values)
        self.network.resize_io_workers(values[NUM_IO_THREADS])

    def _apply_log_defaults(self, log_configs: LogConfigs, log_manager: LogManager,
                            dynamic: Mapping[str, str]) -> None:
        """New dynamic log defaults (Kafka's DynamicLogConfig.reconfigure): every existing
        log takes its topic's config rebuilt over them (its own overrides still win), and
        the controller hosted here elects with the new unclean.leader.election.enable."""
        log_configs.set_dynamic(dict(dynamic))
        logs = log_manager.logs()
        for tp, lg in logs.items():
            lg.update_config(log_configs.get(tp.topic))
        log.info("dynamic log defaults now %s: applied to %d logs", dict(sorted(dynamic.items())),
                 len(logs))
        if self._zk is not None:
            self._zk.set_unclean_leader_election(
                log_configs.default.unclean_leader_election_enable)

    def _log_dir_failed(self, failure: LogDirFailure) -> None:
        """On the loop: a log dir went offline (reported from any thread)."""
        broker = self.broker
        if broker is None:
            return
        offline = broker.replica_manager.handle_log_dir_failure(failure.log_dir)
        log.error("Log dir %s failed: %d partitions answer KAFKA_STORAGE_ERROR until a restart",
                  failure.log_dir, len(offline))
        if self._zk is not None:
            task = asyncio.get_running_loop().create_task(
                self._propagate_log_dir_event(self._zk, failure),
                name="log-dir-event-notification")
            self._log_dir_events.add(task)
            task.add_done_callback(self._log_dir_events.discard)
        if not broker.log_manager.online_dirs() and not self._stop.is_set():
            log.error("Shutdown broker because all log dirs in %s have failed",
                      ", ".join(str(p) for p in broker.log_manager.log_dirs))
            self._exit_code = 1
            self.request_stop()

    async def _propagate_log_dir_event(self, controller: ZkController,
                                       failure: LogDirFailure) -> None:
        from controller.zk_client import ZkError
        for attempt in range(1, LOG_DIR_EVENT_TRIES + 1):
            try:
                await controller.propagate_log_dir_event()
                return
            except (ZkError, RuntimeError) as exc:
                if attempt == LOG_DIR_EVENT_TRIES:
                    log.error("Could not tell the controller that log dir %s failed: %s",
                              failure.log_dir, exc)
                    return
                log.warning("Writing the log dir failure notification failed (%s); retrying"
                            " in %.0f s", exc, LOG_DIR_EVENT_BACKOFF_S)
                await asyncio.sleep(LOG_DIR_EVENT_BACKOFF_S)

    async def _shutdown(self) -> None:
        # 0. In a cluster: controlled shutdown (the controller moves this broker's
        #    leaderships away while it still serves), bounded.
        if self._zk is not None and self.broker is not None:
            from broker import cluster_mode
            await cluster_mode.shutdown_first(self.config, self._zk,
                                              self.broker.metadata_cache)
        # 1. No new connections.
        self.network.stop_accepting()
        log.info("Shutdown step 1/4: stopped accepting connections")
        # Parked fetches, produces and admin requests are answered now (as expired), not
        # held to their deadline; parked JoinGroup/SyncGroup requests are answered
        # NOT_COORDINATOR.
        assert self.broker is not None and self.controller is not None
        self.broker.replica_manager.complete_delayed_operations()
        await self.broker.replica_manager.stop_replication()
        self.broker.admin.shutdown()
        self.broker.group_coordinator.shutdown()
        # 2. Finish in-flight requests, close the connections.
        in_flight = self.network.connection_count
        if not await self.network.drain(DRAIN_TIMEOUT_S):
            log.warning("Requests still in flight after %.0f s: closing their connections",
                        DRAIN_TIMEOUT_S)
        await self.network.close()
        log.info("Shutdown step 2/4: finished in-flight requests, closed %d connections", in_flight)
        # 3. Stop watching the security znodes and the controller; complete parked
        #    operations; stop periodic log work (waits for a running job).
        if self._security is not None:
            await self._security.close()
        for task in list(self._log_dir_events):
            task.cancel()
        await asyncio.gather(*self._log_dir_events, return_exceptions=True)
        await self.controller.shutdown()
        assert self._maintenance is not None
        await self._maintenance.stop()
        await self._cleaner_reconfigurer.stop()
        # Parked requests answered on the loop; producer snapshots written in threads.
        await self.broker.replica_manager.shutdown_off_loop()
        log.info("Shutdown step 3/4: controller, replica manager and log maintenance stopped")
        # 4. Flush and close every log, write the checkpoints and the clean-shutdown marker,
        #    release the log dir lock (storage's LogManager.shutdown).
        high_watermarks = self.broker.replica_manager.high_watermarks()
        await asyncio.to_thread(self.broker.log_manager.shutdown, high_watermarks)
        self._logs_closed = True
        log.info("Shutdown step 4/4: logs flushed, checkpointed and closed")


def _test_pause() -> None:
    """Tests only (``PAUSE_ENV``): wait, bounded, while the named file exists."""
    path = os.environ.get(PAUSE_ENV)
    if not path:
        return
    log.warning("%s is set: waiting while %s exists (at most %.0f s)", PAUSE_ENV, path,
                PAUSE_MAX_S)
    deadline = time.monotonic() + PAUSE_MAX_S
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)


def build_authorizer(config: BrokerConfig, store: AclStore | None) -> AclAuthorizer | None:
    """``authorizer.class.name`` (Kafka's AclAuthorizer) over the ACL store, with
    ``super.users`` and ``allow.everyone.if.no.acl.found``; None when unset."""
    if not config.values["authorizer.class.name"]:
        return None
    raw = config.values["super.users"]
    try:
        super_users = parse_super_users(None if raw is None else str(raw))
    except ValueError as exc:
        raise ConfigError(f"Invalid value {raw!r} for configuration super.users: {exc}") from None
    assert store is not None
    return AclAuthorizer(store, super_users=super_users,
                         allow_everyone_if_no_acl_found=config.get_bool("allow.everyone.if.no.acl.found"))


def configure_logging(stream: IO[str] = sys.stderr) -> None:
    """Kafka's line format and level names (WARN, not WARNING).
    ``MINIKAFKA_LOG_LEVEL`` (default INFO) for every logger; ``MINIKAFKA_LOG_LEVELS``
    (``name=LEVEL,name=LEVEL``) per logger. As in Kafka's log4j.properties, the request
    log ``kafka.request.logger`` stays at WARNING unless named there (DEBUG turns it on)."""
    level = os.environ.get("MINIKAFKA_LOG_LEVEL", "INFO").upper()
    logging.addLevelName(logging.WARNING, "WARN")  # Kafka's (log4j's) name for the level
    logging.basicConfig(
        stream=stream, level=getattr(logging, level, logging.INFO),
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
    )
    levels = {"kafka.request.logger": "WARNING"}
    for item in os.environ.get("MINIKAFKA_LOG_LEVELS", "").split(","):
        name, sep, value = item.partition("=")
        if sep and name.strip():
            levels[name.strip()] = value.strip().upper()
    for name, value in levels.items():
        if isinstance(getattr(logging, value, None), int):
            logging.getLogger(name).setLevel(getattr(logging, value))
        else:
            log.warning("MINIKAFKA_LOG_LEVELS: unknown level %r for %s", value, name)


def run_broker(config: BrokerConfig) -> int:
    """Run a broker in the foreground until SIGTERM/SIGINT; the process exit code."""
    import uvloop

    spec = os.environ.get(FAULT_ENV)
    if spec:
        try:
            plan = fileio.plan_from_spec(spec)
        except ValueError as exc:
            print(f"minikafka: error: {FAULT_ENV}: {exc}", file=sys.stderr)
            return 1
        log.warning("TEST HOOK: storage faults injected (%s=%s): %s", FAULT_ENV, spec, plan)
        fileio.inject(plan)
    log.info("Allocator: %s", allocator.tune(os.environ))
    server = BrokerServer(config, ready_stream=sys.stdout)

    async def main() -> int:
        try:
            return await server.run()
        except TimeoutError:
            log.error("Shutdown did not finish within %.0f s; the next start recovers the logs",
                      SHUTDOWN_TIMEOUT_S)
            # Exit here, on the loop: something is stuck (a disk that stopped answering), and
            # uvloop.run's teardown and the interpreter's exit would both wait for its thread.
            os._exit(1)

    try:
        return uvloop.run(main())
    except (StartupError, ConfigError) as exc:
        log.error("Start-up failed: %s", exc)
        print(f"minikafka: error: {exc}", file=sys.stderr)
        return 1
