"""AlterConfigs: v0-2

Behavior:
- TOPIC: the given configs REPLACE the topic's whole override set (configs not listed go
  back to their defaults), as Kafka's legacy AlterConfigs does. Each name and value is
  checked (unknown name, null or invalid value -> INVALID_CONFIG); a key given twice ->
  INVALID_REQUEST; unknown topic -> UNKNOWN_TOPIC_OR_PARTITION. The change is durable and
  applied to the topic's live logs before the answer.
- BROKER: this broker has no dynamic configs: any config -> INVALID_CONFIG; another
  broker id -> INVALID_REQUEST. Other resource types -> INVALID_REQUEST.
- A resource named twice in one request -> INVALID_REQUEST for it.
- ValidateOnly: every check, nothing changed.

Version notes:
- v0 baseline; v1 throttling semantics only; v2 flexible.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial

from broker import config_admin
from broker.handlers.authz import config_resource_error
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security.acl import AclOperation
from broker.topics import TopicError
from protocol.errors import ErrorCode
from protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse

log = logging.getLogger(__name__)


def _replacement(
    configs: Sequence[AlterConfigsRequest.AlterableConfig], current: Mapping[str, str]
) -> dict[str, str | None]:
    """AlterConfigs replaces the topic's whole override set with the configs given."""
    return {c.name: c.value for c in configs}


@api(AlterConfigsRequest.API_KEY, min_version=0, max_version=2, request=AlterConfigsRequest)
async def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> HandlerResult:
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    responses = []
    for resource in request.resources:
        answer = AlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=ErrorCode.NO_ERROR, error_message=None,
            resource_type=resource.resource_type, resource_name=resource.resource_name)
        denied = config_resource_error(ctx, resource.resource_type, resource.resource_name,
                                       AclOperation.ALTER_CONFIGS)
        if denied is not None:
            answer.error_code, answer.error_message = denied, "Authorization failed."
            responses.append(answer)
            continue
        try:
            await config_admin.alter_resource(
                ctx.broker.admin, resource.resource_type, resource.resource_name,
                [c.name for c in resource.configs], partial(_replacement, resource.configs),
                named_twice=counts[(resource.resource_type, resource.resource_name)] > 1,
                validate_only=request.validate_only)
        except TopicError as exc:
            log.info("AlterConfigs %s from %s refused: %s %s", resource.resource_name,
                     ctx.client_id, exc.error_code.name, exc.message)
            answer.error_code, answer.error_message = exc.error_code, exc.message
        responses.append(answer)
    return Respond(AlterConfigsResponse(responses=responses))
