"""DescribeCluster: v0-1

Behavior:
- The cluster id, the live brokers at their endpoints for this listener (with their
  racks) and the controller id, from the metadata cache (-1 when no controller is known).
  Cluster authorized operations are not computed (no authorizer): -2147483648.
- EndpointType (v1): BROKER (1) is served; CONTROLLER (2) -> MISMATCHED_ENDPOINT_TYPE,
  as a Kafka broker answers (this process has no separate controller endpoint); any
  other value -> UNSUPPORTED_ENDPOINT_TYPE.

Version notes:
- v0 baseline (flexible); v1 adds EndpointType to the request and the response.
"""

from __future__ import annotations

from typing import Final

from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from protocol.errors import ErrorCode
from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse

AUTHORIZED_OPERATIONS_OMITTED: Final = -2147483648
ENDPOINT_BROKER: Final = 1
ENDPOINT_CONTROLLER: Final = 2


@api(DescribeClusterRequest.API_KEY, min_version=0, max_version=1, request=DescribeClusterRequest)
async def handle_describe_cluster(
    ctx: RequestContext, request: DescribeClusterRequest
) -> HandlerResult:
    broker = ctx.broker
    if ctx.api_version >= 1 and request.endpoint_type != ENDPOINT_BROKER:
        mismatched = request.endpoint_type == ENDPOINT_CONTROLLER
        return Respond(DescribeClusterResponse(
            error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE if mismatched
            else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message=(
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint"
                " of type CONTROLLER" if mismatched
                else f"Unsupported endpoint type {request.endpoint_type}"),
            endpoint_type=request.endpoint_type,
            cluster_id=broker.cluster_id,
        ))
    cache = broker.metadata_cache
    brokers = []
    for b in cache.alive_brokers():
        endpoint = b.endpoint(ctx.listener_name)
        if endpoint is not None:
            brokers.append(DescribeClusterResponse.DescribeClusterBroker(
                broker_id=b.broker_id, host=endpoint.host, port=endpoint.port, rack=b.rack))
    controller_id = cache.controller_id
    return Respond(DescribeClusterResponse(
        error_code=ErrorCode.NO_ERROR,
        error_message=None,
        endpoint_type=ENDPOINT_BROKER,
        cluster_id=broker.cluster_id,
        controller_id=-1 if controller_id is None else controller_id,
        brokers=brokers,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    ))
