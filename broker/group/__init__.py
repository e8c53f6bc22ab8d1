"""The group coordinator: classic consumer groups and committed offsets.

- ``state``, ``member``, ``metadata``: a group's states (Kafka's names), members and offsets;
- ``coordinator`` (+ ``join``, ``delayed``): the membership protocol, sans-IO, on ``timers``;
- ``offsets``, ``admin``: OffsetCommit/Fetch/Delete, ListGroups/DescribeGroups/DeleteGroups;
- ``manager``, ``records``, ``store``: the groups' cache and their ``__consumer_offsets``
  records (Kafka's formats), loading and expiry; ``partitioning``: group -> partition;
- ``service``, ``log_store``: the broker glue (config, topic creation, appends through the
  replica manager, loading on leadership, shutdown); the handlers reach it through
  ``broker.handlers.group_support``.
"""
