"""What AlterConfigs and IncrementalAlterConfigs share: each resource of the request is
authorized, then altered through ``config_admin.alter_resource``. The two APIs differ only
in how the new topic override set is computed (``topic_overrides``), in their names and in
their response classes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Protocol, TypeVar

from broker import config_admin
from broker.handlers.authz import config_resource_error
from broker.handlers.base import RequestContext
from broker.security.acl import AclOperation
from broker.topics import TopicError
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    import logging


class _NamedConfig(Protocol):
    @property
    def name(self) -> str: ...


class AlterableResource(Protocol):
    """A resource of either request: its type and name and the configs it names."""

    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def configs(self) -> Sequence[_NamedConfig]: ...


R = TypeVar("R", bound=AlterableResource)


async def alter_config_resources(
    ctx: RequestContext,
    log: logging.Logger,
    api_name: str,
    resources: Sequence[R],
    topic_overrides: Callable[[R, Mapping[str, str]], Mapping[str, str | None]],
    *,
    validate_only: bool,
) -> list[tuple[R, ErrorCode, str | None]]:
    """Each resource, in request order, with the error code and message its answer carries:
    NO_ERROR and None once altered (or, with ``validate_only``, checked), the authorization
    failure, or the ``TopicError`` ``alter_resource`` raised (logged at INFO on the
    handler's ``log``, as refused by ``api_name``). ``topic_overrides(resource, current)``
    is the resource's new override set."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    results: list[tuple[R, ErrorCode, str | None]] = []
    for resource in resources:
        denied = config_resource_error(ctx, resource.resource_type, resource.resource_name,
                                       AclOperation.ALTER_CONFIGS)
        if denied is not None:
            results.append((resource, denied, "Authorization failed."))
            continue
        try:
            await config_admin.alter_resource(
                ctx.broker.admin, resource.resource_type, resource.resource_name,
                [c.name for c in resource.configs],
                partial(topic_overrides, resource),
                named_twice=counts[(resource.resource_type, resource.resource_name)] > 1,
                validate_only=validate_only)
        except TopicError as exc:
            log.info("%s %s from %s refused: %s %s", api_name, resource.resource_name,
                     ctx.client_id, exc.error_code.name, exc.message)
            results.append((resource, exc.error_code, exc.message))
            continue
        results.append((resource, ErrorCode.NO_ERROR, None))
    return results
