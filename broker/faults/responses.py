"""The response a broker gives when a whole request fails with one error code: Kafka's
``AbstractRequest.getErrorResponse(error)``, per API.

Each builder mirrors what the request asked about (its topics and partitions, groups,
resources, ...) and puts the error code on every entry, with Kafka's "unknown" values for
the rest (offsets -1, node -1, empty records). APIs whose response has a top-level
``error_code`` and no table entry get it set there. Anything else cannot be answered with
an error and is refused when the fault is armed (``supports``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.messages import RESPONSES

Builder = Callable[[Any, int, int], Any]  # (request, version, error code) -> response


def supports(api_key: int) -> bool:
    """Whether an error response can be built for ``api_key``."""
    return api_key in _BUILDERS or (api_key in RESPONSES
                                    and "error_code" in RESPONSES[api_key].__slots__)


def error_response(api_key: int, request: Any, version: int, error_code: int) -> Any:
    """The response to ``request`` (decoded at ``version``) failing with ``error_code``."""
    builder = _BUILDERS.get(api_key)
    if builder is not None:
        return builder(request, version, error_code)
    if not supports(api_key):
        raise ValueError(f"api key {api_key} has no error response")
    response: Any = RESPONSES[api_key]()
    response.error_code = error_code
    return response


# -- data path -----------------------------------------------------------------------------


def _produce(request: Any, version: int, code: int) -> Any:
    from protocol.messages import ProduceResponse as R

    return R(responses=[
        R.TopicProduceResponse(name=t.name, partition_responses=[
            R.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1,
                                       log_append_time_ms=-1, log_start_offset=-1)
            for p in t.partition_data])
        for t in request.topic_data])


def _fetch(request: Any, version: int, code: int) -> Any:
    from protocol.messages import FetchResponse as R

    return R(error_code=code if version >= 7 else 0, session_id=0, responses=[
        R.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[
            R.PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1,
                            last_stable_offset=-1, log_start_offset=-1, records=b"")
            for p in t.partitions])
        for t in request.topics])


def _list_offsets(request: Any, version: int, code: int) -> Any:
    from protocol.messages import ListOffsetsResponse as R

    return R(topics=[
        R.ListOffsetsTopicResponse(name=t.name, partitions=[
            R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code,
                                           timestamp=-1, offset=-1)
            for p in t.partitions])
        for t in request.topics])


def _metadata(request: Any, version: int, code: int) -> Any:
    from protocol.messages import MetadataResponse as R

    return R(controller_id=-1, cluster_id=None, topics=[
        # Names are nullable in the response from v12 only (topics asked for by id).
        R.MetadataResponseTopic(error_code=code, name=t.name if version >= 12 else t.name or "",
                                topic_id=t.topic_id)
        for t in request.topics or ()])


def _delete_records(request: Any, version: int, code: int) -> Any:
    from protocol.messages import DeleteRecordsResponse as R

    return R(topics=[
        R.DeleteRecordsTopicResult(name=t.name, partitions=[
            R.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                           error_code=code)
            for p in t.partitions])
        for t in request.topics])


def _offset_for_leader_epoch(request: Any, version: int, code: int) -> Any:
    from protocol.messages import OffsetForLeaderEpochResponse as R

    return R(topics=[
        R.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            R.EpochEndOffset(error_code=code, partition=p.partition, leader_epoch=-1,
                             end_offset=-1)
            for p in t.partitions])
        for t in request.topics])


# -- groups --------------------------------------------------------------------------------


def _find_coordinator(request: Any, version: int, code: int) -> Any:
    from protocol.messages import FindCoordinatorResponse as R

    if version >= 4:
        return R(coordinators=[R.Coordinator(key=k, node_id=-1, host="", port=-1,
                                             error_code=code)
                               for k in request.coordinator_keys])
    return R(error_code=code, node_id=-1, host="", port=-1)


def _offset_commit(request: Any, version: int, code: int) -> Any:
    from protocol.messages import OffsetCommitResponse as R

    return R(topics=[
        R.OffsetCommitResponseTopic(name=t.name, partitions=[
            R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions])
        for t in request.topics])


def _offset_fetch(request: Any, version: int, code: int) -> Any:
    from protocol.messages import OffsetFetchResponse as R

    if version >= 8:
        return R(groups=[R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=code)
                         for g in request.groups])
    if version >= 2:
        return R(error_code=code)
    return R(topics=[
        R.OffsetFetchResponseTopic(name=t.name, partitions=[
            R.OffsetFetchResponsePartition(partition_index=i, committed_offset=-1,
                                           metadata="", error_code=code)
            for i in t.partition_indexes])
        for t in request.topics or ()])


def _describe_groups(request: Any, version: int, code: int) -> Any:
    from protocol.messages import DescribeGroupsResponse as R

    return R(groups=[R.DescribedGroup(error_code=code, group_id=g) for g in request.groups])


def _delete_groups(request: Any, version: int, code: int) -> Any:
    from protocol.messages import DeleteGroupsResponse as R

    return R(results=[R.DeletableGroupResult(group_id=g, error_code=code)
                      for g in request.groups_names])


# -- admin ---------------------------------------------------------------------------------


def _create_topics(request: Any, version: int, code: int) -> Any:
    from protocol.messages import CreateTopicsResponse as R

    return R(topics=[R.CreatableTopicResult(name=t.name, error_code=code, num_partitions=-1,
                                            replication_factor=-1, configs=None)
                     for t in request.topics])


def _delete_topics(request: Any, version: int, code: int) -> Any:
    from protocol.messages import DeleteTopicsResponse as R

    if version >= 6:
        return R(responses=[R.DeletableTopicResult(name=t.name, topic_id=t.topic_id,
                                                   error_code=code)
                            for t in request.topics])
    return R(responses=[R.DeletableTopicResult(name=n, error_code=code)
                        for n in request.topic_names])


def _create_partitions(request: Any, version: int, code: int) -> Any:
    from protocol.messages import CreatePartitionsResponse as R

    return R(results=[R.CreatePartitionsTopicResult(name=t.name, error_code=code)
                      for t in request.topics])


def _describe_configs(request: Any, version: int, code: int) -> Any:
    from protocol.messages import DescribeConfigsResponse as R

    return R(results=[R.DescribeConfigsResult(error_code=code, resource_type=r.resource_type,
                                              resource_name=r.resource_name)
                      for r in request.resources])


def _alter_configs(request: Any, version: int, code: int) -> Any:
    from protocol.messages import AlterConfigsResponse as R

    return R(responses=[R.AlterConfigsResourceResponse(
        error_code=code, resource_type=r.resource_type, resource_name=r.resource_name)
        for r in request.resources])


def _incremental_alter_configs(request: Any, version: int, code: int) -> Any:
    from protocol.messages import IncrementalAlterConfigsResponse as R

    return R(responses=[R.AlterConfigsResourceResponse(
        error_code=code, resource_type=r.resource_type, resource_name=r.resource_name)
        for r in request.resources])


def _create_acls(request: Any, version: int, code: int) -> Any:
    from protocol.messages import CreateAclsResponse as R

    return R(results=[R.AclCreationResult(error_code=code) for _ in request.creations])


def _delete_acls(request: Any, version: int, code: int) -> Any:
    from protocol.messages import DeleteAclsResponse as R

    return R(filter_results=[R.DeleteAclsFilterResult(error_code=code)
                             for _ in request.filters])


def _alter_client_quotas(request: Any, version: int, code: int) -> Any:
    from protocol.messages import AlterClientQuotasResponse as R

    return R(entries=[R.EntryData(error_code=code, entity=[
        R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in request.entries])


def _alter_user_scram_credentials(request: Any, version: int, code: int) -> Any:
    from protocol.messages import AlterUserScramCredentialsResponse as R

    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return R(results=[R.AlterUserScramCredentialsResult(user=u, error_code=code) for u in users])


def _elect_leaders(request: Any, version: int, code: int) -> Any:
    from protocol.messages import ElectLeadersResponse as R

    # The top-level error code exists from v1; every partition asked for carries it too.
    return R(error_code=code if version >= 1 else 0, replica_election_results=[
        R.ReplicaElectionResult(topic=t.topic, partition_result=[
            R.PartitionResult(partition_id=p, error_code=code) for p in t.partitions])
        for t in request.topic_partitions or ()])


_BUILDERS: dict[int, Builder] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    15: _describe_groups,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    23: _offset_for_leader_epoch,
    30: _create_acls,
    31: _delete_acls,
    32: _describe_configs,
    33: _alter_configs,
    37: _create_partitions,
    42: _delete_groups,
    43: _elect_leaders,
    44: _incremental_alter_configs,
    49: _alter_client_quotas,
    51: _alter_user_scram_credentials,
}
