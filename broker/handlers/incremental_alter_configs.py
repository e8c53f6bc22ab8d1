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
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING

from broker import config_admin
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.config_support import alter_config_resources
from protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

if TYPE_CHECKING:
    from broker.admin_manager import AdminManager

log = logging.getLogger(__name__)


def _apply_operations(
    admin: AdminManager, resource: IncrementalAlterConfigsRequest.AlterConfigsResource,
    current: Mapping[str, str],
) -> dict[str, str | None]:
    """The topic's overrides after the resource's operations, in request order."""
    ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
    return config_admin.incremental_overrides(
        current, ops, admin.log_broker_props(),
        broker=resource.resource_type == config_admin.ResourceType.BROKER)


@api(IncrementalAlterConfigsRequest.API_KEY, min_version=0, max_version=1,
     request=IncrementalAlterConfigsRequest)
async def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> HandlerResult:
    results = await alter_config_resources(
        ctx, log, "IncrementalAlterConfigs", request.resources,
        partial(_apply_operations, ctx.broker.admin), validate_only=request.validate_only)
    return Respond(IncrementalAlterConfigsResponse(responses=[
        IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=code, error_message=message,
            resource_type=resource.resource_type, resource_name=resource.resource_name)
        for resource, code, message in results]))
