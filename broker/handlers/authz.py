"""Authorization checks for handlers: what Kafka's ``AuthHelper`` does, over the broker's
authorizer (``authorizer.class.name``; without one every request is allowed).

A denial is logged at INFO as Kafka's authorizer logs it: ``Principal = User:alice is Denied
Operation = Read from host = 127.0.0.1 on resource = Topic:LITERAL:orders for request =
Fetch``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from broker.handlers.base import RequestContext
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType, camel_name
from protocol.errors import ErrorCode
from protocol.messages import API_NAMES

log = logging.getLogger("broker.authorizer")

AUTHORIZATION_ERRORS = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ResourceType.DELEGATION_TOKEN: ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}


def authorize(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
              name: str, *, log_denied: bool = True) -> bool:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    allowed = authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name)
    if not allowed and log_denied:
        log.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s "
                 "for request = %s with resourceRefCount = 1", ctx.principal, camel_name(operation),
                 ctx.client_host, camel_name(resource_type), name,
                 API_NAMES.get(ctx.api_key, ctx.api_key))
    return allowed


def authorize_cluster(ctx: RequestContext, operation: AclOperation, *,
                      log_denied: bool = True) -> bool:
    return authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied)


def filter_authorized(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
                      names: Iterable[str], *, log_denied: bool = True) -> set[str]:
    """The names (each checked once) the principal may do ``operation`` on."""
    if ctx.broker.authorizer is None:  # every request is allowed
        return set(names)
    return {n for n in set(names) if authorize(ctx, operation, resource_type, n, log_denied=log_denied)}


def config_resource_error(ctx: RequestContext, resource_type: int, name: str,
                          operation: AclOperation) -> ErrorCode | None:
    """DescribeConfigs / (Incremental)AlterConfigs: a topic needs ``operation`` on it
    (TOPIC_AUTHORIZATION_FAILED), the broker on the cluster (CLUSTER_AUTHORIZATION_FAILED).
    ``resource_type``: the configs APIs' codes (2 topic, 4 broker)."""
    if resource_type == 2 and not authorize(ctx, operation, ResourceType.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type == 4 and not authorize_cluster(ctx, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None
