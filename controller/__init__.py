"""The controller: decides leaders and tells brokers, only in LeaderAndIsr, UpdateMetadata
and StopReplica requests.

The seam (Kafka's own, ZooKeeper mode)
=======================================

A partition exists on a broker, and has a role there, only because a LeaderAndIsr said
so; a broker knows the cluster only from UpdateMetadata, kept in its metadata cache; a
replica is removed only by StopReplica. The controller never calls into a broker (it never
imports ``broker``); brokers never decide leadership. On one node ``controller.local``
delivers those requests in process; in a cluster the ZooKeeper controller sends the same
requests over the network. So the single-node tests exercise the path a cluster uses.

Layering: ``protocol < storage < client < controller < broker``. The broker imports the
controller's types and topic store (admin requests write the store, as Kafka's brokers
write ZooKeeper) and builds the local controller at start-up; the controller imports
nothing of the broker.

Modules
-------

- ``topic_store``: ``TopicStore`` (the cluster's durable topic metadata: assignments, topic
  ids, configs, deletion marks, partition states) and ``TopicStoreWatcher``; the module
  docstring maps every method to Kafka's znodes. ``local_store.LocalTopicStore`` is the
  single node's JSON file; the ZooKeeper implementation keeps Kafka's znodes.
- ``channel``: ``ControllerChannel`` (one FIFO per live broker; ``send`` returns a future
  of the response), ``BrokerRegistration`` (id, endpoints, rack, broker epoch) and
  ``ControlRequestBatch`` (one decision -> at most one request of each kind per broker,
  carrying controller id, controller epoch and the target's broker epoch).
- ``core.ControllerCore``: the decisions, shared by both controllers: ``activate`` (load
  the store, tell every live broker everything, elect new and offline partitions, resume
  deletions) and the events ``TopicsChanged``, ``PartitionsChanged``,
  ``DeletionsRequested``, ``StopReplicaResponseReceived``. A cluster controller adds
  broker start-up/failure, controlled shutdown, preferred election and AlterPartition
  events on the same context and event manager.
- ``events.ControllerEventManager``: one task, one bounded queue; ``put_threadsafe`` for
  kazoo's callback threads.
- ``context.ControllerContext``: live brokers, topics and assignments, leadership.
- ``leader_and_isr``: ``LeaderAndIsr`` (leader, leader epoch, ISR, recovery state,
  partition epoch = the state znode's version) and Kafka's sentinels (NO_LEADER,
  LEADER_DURING_DELETE, EPOCH_DURING_DELETE).
- ``assignment``, ``election``: pure functions (Kafka's ``assignReplicasToBrokers`` with
  its rack-aware variant; offline, reassignment, preferred and controlled-shutdown leader
  election).
- ``local``: ``LocalController`` (always active, epoch 1, its broker the only live one)
  and ``InProcessChannel``.

The ZooKeeper side (a cluster; Kafka's znodes, on kazoo):

- ``zk_data``: Kafka 3.9's znode paths and JSON, pure (checked against Kafka itself).
- ``zk_client.ZkClient``: one kazoo session awaited from the event loop (chroot, timeouts,
  version-checked writes, transactions fenced on ``/controller_epoch``); watches and session
  changes come in as events from kazoo's threads.
- ``zk_registration``, ``zk_election``, ``zk_session.ZkBrokerSession``: cluster id,
  ``/brokers/ids/<id>`` (broker epoch = czxid), the ``/controller`` race with the controller
  epoch, re-registration after a session expiry.
- ``zk_store.ZkTopicStore``: the TopicStore in Kafka's znodes, with its watches.
- ``zk_core.ZkControllerCore``: ``ControllerCore`` plus broker changes, controlled
  shutdown, preferred/unclean election and the auto rebalance.
- ``zk.ZkController``: the ZooKeeper twin of ``LocalController``: a core per tenure.

The broker's side
-----------------

- ``broker.metadata_cache.MetadataCache``: written only by UpdateMetadata; answers "does
  it exist, who leads it, which brokers are alive".
- ``broker.replica_manager.ReplicaManager``: ``become_leader_or_follower(LeaderAndIsr)``,
  ``stop_replicas(StopReplica)`` and ``maybe_update_metadata_cache(UpdateMetadata)`` are
  the only ways partitions appear, change role or go; each fences on the controller epoch
  (STALE_CONTROLLER_EPOCH) and on the leader epoch (an older or equal leader epoch in
  LeaderAndIsr is ignored with STALE_CONTROLLER_EPOCH, an older one in StopReplica is
  FENCED_LEADER_EPOCH, as Kafka answers). Replica fetchers attach where followers are made
  (``broker.fetchers.FetcherManager``: added for new followers, removed for new
  leaders and stopped replicas).
- ``broker.control_requests.ControlRequestHandler``: the three APIs' handler, for the
  network handlers and the in-process channel alike (broker epoch check:
  STALE_BROKER_EPOCH), which also tells the group coordinator about leadership changes
  and deleted partitions and completes admin requests waiting in the topic purgatory.
- ``broker.admin_manager.AdminManager``: CreateTopics, CreatePartitions, DeleteTopics and
  config changes write the topic store, then wait in the topic purgatory until the
  metadata cache shows the result (Kafka's ``ZkAdminManager``).
"""
