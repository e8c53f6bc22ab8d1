"""IncrementalAlterConfigs: v0-1

Behavior:
- TOPIC: operations on the topic's overrides, in request order: SET (value replaces),
  DELETE (override removed, back to the default), APPEND / SUBTRACT (LIST configs only,
  e.g. cleanup.policy; starting from the override or else the current default; other
  types -> INVALID_CONFIG). The resulting override set is validated as a whole (unknown
  name, null or invalid value -> INVALID_CONFIG), then stored durably and applied to the
  topic's live logs. A key twice in one resource -> INVALID_REQUEST; an unknown operation
  -> INVALID_REQUEST; unknown topic -> UNKNOWN_TOPIC_OR_PARTITION.
- BROKER: no dynamic broker configs: any operation -> INVALID_CONFIG; another broker id ->
  INVALID_REQUEST. Other resource types -> INVALID_REQUEST.
- A resource named twice in one request -> INVALID_REQUEST for it.
- ValidateOnly: every check, nothing changed.

Version notes:
- v0 baseline; v1 flexible.
"""

from __future__ import annotations

import logging
from collections import Counter

from broker import config_admin, topic_admin
from broker.config_admin import ResourceType
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.topics import TopicError
from protocol.errors import ErrorCode
from protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

log = logging.getLogger(__name__)


@api(IncrementalAlterConfigsRequest.API_KEY, min_version=0, max_version=1,
     request=IncrementalAlterConfigsRequest)
async def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> HandlerResult:
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    responses = []
    for resource in request.resources:
        answer = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=ErrorCode.NO_ERROR, error_message=None,
            resource_type=resource.resource_type, resource_name=resource.resource_name)
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate resource in request")
            names = [c.name for c in resource.configs]
            config_admin.check_unique_keys(names)
            if resource.resource_type == ResourceType.TOPIC:
                info = config_admin.require_topic(ctx.broker, resource.resource_name)
                ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
                overrides = config_admin.incremental_overrides(
                    info, ops, topic_admin.explicit_broker_props(ctx.broker))
                await config_admin.apply_topic_configs(ctx.broker, info, overrides, request.validate_only)
            elif resource.resource_type == ResourceType.BROKER:
                config_admin.require_this_broker(ctx.broker, resource.resource_name)
                config_admin.refuse_broker_changes(names)
            else:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 f"Unsupported resource type {resource.resource_type}")
        except TopicError as exc:
            log.info("IncrementalAlterConfigs %s from %s refused: %s %s", resource.resource_name,
                     ctx.client_id, exc.code.name, exc.message)
            answer.error_code, answer.error_message = exc.code, exc.message
        responses.append(answer)
    return Respond(IncrementalAlterConfigsResponse(responses=responses))
