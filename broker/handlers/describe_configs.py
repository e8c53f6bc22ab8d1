"""DescribeConfigs: v1-4

Behavior:
- TOPIC resources: every Kafka topic config (or only the ConfigurationKeys asked for;
  unknown keys are left out), value resolved override -> broker property -> Kafka default
  with source DYNAMIC_TOPIC_CONFIG / STATIC_BROKER_CONFIG / DEFAULT_CONFIG, read_only false.
  Unknown topic -> UNKNOWN_TOPIC_OR_PARTITION; illegal name -> INVALID_TOPIC_EXCEPTION.
- BROKER resources: this broker's id -> every broker property (explicit ones
  STATIC_BROKER_CONFIG, the rest DEFAULT_CONFIG), all read_only (no dynamic broker
  configs); "" (cluster defaults) -> no configs; another id -> INVALID_REQUEST.
  Password-type properties are sensitive: value null.
- Any other resource type (BROKER_LOGGER included) -> INVALID_REQUEST.
- IncludeSynonyms: the synonyms in Kafka's order (topic override, broker properties set,
  then the broker default); otherwise none. Documentation is null (IncludeDocumentation is
  accepted, not served).

Version notes:
- v1 baseline (ConfigSource, synonyms); v2 throttling semantics only; v3 ConfigType and
  documentation; v4 flexible.
"""

from __future__ import annotations

import logging

from broker import config_admin
from broker.config_admin import ConfigEntry, ResourceType
from broker.handlers.authz import config_resource_error
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security.acl import AclOperation
from broker.topics import TopicError
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse

log = logging.getLogger(__name__)

Result = DescribeConfigsResponse.DescribeConfigsResult


@api(DescribeConfigsRequest.API_KEY, min_version=1, max_version=4, request=DescribeConfigsRequest)
async def handle_describe_configs(
    ctx: RequestContext, request: DescribeConfigsRequest
) -> HandlerResult:
    results = []
    for resource in request.resources:
        result = Result(error_code=ErrorCode.NO_ERROR, error_message="",
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name, configs=[])
        denied = config_resource_error(ctx, resource.resource_type, resource.resource_name,
                                       AclOperation.DESCRIBE_CONFIGS)
        if denied is not None:
            result.error_code, result.error_message = denied, "Authorization failed."
            results.append(result)
            continue
        try:
            if resource.resource_type == ResourceType.TOPIC:
                entries = await config_admin.describe_topic(
                    ctx.broker.admin, resource.resource_name, resource.configuration_keys)
            elif resource.resource_type == ResourceType.BROKER:
                entries = config_admin.describe_broker(
                    ctx.broker.admin, resource.resource_name, resource.configuration_keys)
            else:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 f"Unsupported resource type {resource.resource_type}")
        except TopicError as exc:
            result.error_code, result.error_message = exc.error_code, exc.message
        else:
            result.configs = [_entry(e, request.include_synonyms) for e in entries]
        results.append(result)
    return Respond(DescribeConfigsResponse(results=results))


def _entry(e: ConfigEntry, include_synonyms: bool) -> DescribeConfigsResponse.DescribeConfigsResourceResult:
    synonyms = [
        DescribeConfigsResponse.DescribeConfigsSynonym(name=s.name, value=s.value, source=s.source)
        for s in e.synonyms
    ] if include_synonyms else []
    return DescribeConfigsResponse.DescribeConfigsResourceResult(
        name=e.name, value=e.value, read_only=e.read_only, config_source=e.source, is_sensitive=e.is_sensitive, synonyms=synonyms,
        config_type=e.type, documentation=None,
    )
