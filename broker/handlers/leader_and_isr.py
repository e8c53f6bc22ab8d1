"""LeaderAndIsr: v5-7

Behavior:
- Sent by the controller only: with an authorizer, the sender needs CLUSTER_ACTION on the
  cluster (the brokers' principal, a super user), else CLUSTER_AUTHORIZATION_FAILED for the
  request and every partition (Kafka's ``getErrorResponse``) and nothing applied, as Kafka
  checks. Makes this
  broker leader or follower of the partitions listed, creating their logs; the only way a
  partition comes to be hosted or changes role (``broker.replica_manager``).
- A broker epoch older than this broker's -> STALE_BROKER_EPOCH for the request and every
  partition, nothing applied; an older controller epoch -> STALE_CONTROLLER_EPOCH likewise.
- Per partition: a leader epoch not newer than the current one -> STALE_CONTROLLER_EPOCH
  (ignored, as Kafka does); a topic id other than the hosted log's ->
  INCONSISTENT_TOPIC_ID; this broker not among the replicas -> UNKNOWN_TOPIC_OR_PARTITION;
  a log that cannot be created -> KAFKA_STORAGE_ERROR.

Version notes:
- v5 adds the request Type, topic ids and the per-topic response; v6 leader recovery
  state; v7 isKRaftController (never set by our controllers). v0-4 are not served: they
  predate topic ids, which the controller always sends.
"""

from __future__ import annotations

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.replica_manager import leader_and_isr_error
from broker.security.acl import AclOperation as Op
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrRequest


@api(LeaderAndIsrRequest.API_KEY, min_version=5, max_version=7, request=LeaderAndIsrRequest)
async def handle_leader_and_isr(ctx: RequestContext, request: LeaderAndIsrRequest) -> HandlerResult:
    if not authorize_cluster(ctx, Op.CLUSTER_ACTION):
        return Respond(leader_and_isr_error(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    return Respond(await ctx.broker.control.leader_and_isr(request))
