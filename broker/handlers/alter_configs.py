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
from collections.abc import Mapping

from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.config_support import alter_config_resources
from protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse

log = logging.getLogger(__name__)


def _replacement(
    resource: AlterConfigsRequest.AlterConfigsResource, current: Mapping[str, str]
) -> dict[str, str | None]:
    """AlterConfigs replaces the topic's whole override set with the configs given."""
    return {c.name: c.value for c in resource.configs}


@api(AlterConfigsRequest.API_KEY, min_version=0, max_version=2, request=AlterConfigsRequest)
async def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> HandlerResult:
    results = await alter_config_resources(ctx, log, "AlterConfigs", request.resources,
                                           _replacement, validate_only=request.validate_only)
    return Respond(AlterConfigsResponse(responses=[
        AlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=code, error_message=message,
            resource_type=resource.resource_type, resource_name=resource.resource_name)
        for resource, code, message in results]))
