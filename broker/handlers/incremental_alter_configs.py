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
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from broker import config_admin
from broker.handlers.authz import config_resource_error
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security.acl import AclOperation
from broker.topics import TopicError
from protocol.errors import ErrorCode
from protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

if TYPE_CHECKING:
    from broker.admin_manager import AdminManager

log = logging.getLogger(__name__)


def _apply_operations(
    admin: AdminManager, configs: Sequence[IncrementalAlterConfigsRequest.AlterableConfig],
    current: Mapping[str, str],
) -> dict[str, str | None]:
    """The topic's overrides after the operations, in request order."""
    ops = [(c.name, c.config_operation, c.value) for c in configs]
    return config_admin.incremental_overrides(current, ops, admin.explicit_broker_props())


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
        denied = config_resource_error(ctx, resource.resource_type, resource.resource_name,
                                       AclOperation.ALTER_CONFIGS)
        if denied is not None:
            answer.error_code, answer.error_message = denied, "Authorization failed."
            responses.append(answer)
            continue
        try:
            await config_admin.alter_resource(
                ctx.broker.admin, resource.resource_type, resource.resource_name,
                [c.name for c in resource.configs],
                partial(_apply_operations, ctx.broker.admin, resource.configs),
                named_twice=counts[(resource.resource_type, resource.resource_name)] > 1,
                validate_only=request.validate_only)
        except TopicError as exc:
            log.info("IncrementalAlterConfigs %s from %s refused: %s %s", resource.resource_name,
                     ctx.client_id, exc.error_code.name, exc.message)
            answer.error_code, answer.error_message = exc.error_code, exc.message
        responses.append(answer)
    return Respond(IncrementalAlterConfigsResponse(responses=responses))
