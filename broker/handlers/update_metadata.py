"""UpdateMetadata: v7-8

Behavior:
- Sent by the controller only: replaces the live brokers and updates the partitions it
  lists in this broker's metadata cache (a partition with leader -2 is removed); the only
  writer of the cache (``broker.metadata_cache``). Admin requests waiting for the topics it
  names are retried; deleted partitions' committed offsets are removed.
- A broker epoch older than this broker's -> STALE_BROKER_EPOCH; an older controller
  epoch -> STALE_CONTROLLER_EPOCH; nothing is applied then.

Version notes:
- v7 adds topic ids (v6 flexible); v8 isKRaftController and the tagged Type (never set by
  our controllers). Older versions are not served.
"""

from __future__ import annotations

from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from protocol.messages.update_metadata import UpdateMetadataRequest


@api(UpdateMetadataRequest.API_KEY, min_version=7, max_version=8, request=UpdateMetadataRequest)
async def handle_update_metadata(ctx: RequestContext,
                                 request: UpdateMetadataRequest) -> HandlerResult:
    return Respond(await ctx.broker.control.update_metadata(request))
