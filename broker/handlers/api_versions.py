"""ApiVersions: v0-4

Behavior:
- Answers with exactly the registered handlers' version ranges (``base.REGISTRY``), sorted
  by api key: what is advertised is what is implemented.
- A version above 4 (a newer client) gets the v0 response with UNSUPPORTED_VERSION and,
  as in KIP-511, only ApiVersions' own range, so the client retries with a version we
  have (``unsupported_version_response``; the request channel encodes it at v0 with
  response header v0).
- v3+: the client software name and version must match Kafka's pattern
  ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``; otherwise INVALID_REQUEST (Kafka's
  answer) with no api keys. Valid ones are logged at debug level.
- No features are advertised (no KRaft metadata.version): supported_features empty,
  finalized_features_epoch -1.

Version notes:
- v1+ throttle_time_ms (always 0); v3+ flexible, client software fields, tagged feature
  fields; v4 is v3 with the UNSUPPORTED_VERSION semantics made explicit (KIP-511).
- The response always uses response header v0, even for flexible versions.
"""

from __future__ import annotations

import logging
import re

from broker.handlers.base import REGISTRY, HandlerResult, RequestContext, Respond, api
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

log = logging.getLogger(__name__)

MAX_VERSION = 4
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def advertised_api_keys() -> list[ApiVersionsResponse.ApiVersion]:
    return [ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)
            for key, lo, hi in REGISTRY.ranges()]


def unsupported_version_response() -> ApiVersionsResponse:
    """The answer to an ApiVersions request above our highest version (sent as v0)."""
    spec = REGISTRY[ApiVersionsRequest.API_KEY]
    return ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=spec.api_key,
                                                 min_version=spec.min_version,
                                                 max_version=spec.max_version)],
    )


def api_versions_response(api_version: int, request: ApiVersionsRequest,
                          connection_id: str) -> ApiVersionsResponse:
    if api_version >= 3:
        name, version = request.client_software_name, request.client_software_version
        if not (_SOFTWARE.fullmatch(name) and _SOFTWARE.fullmatch(version)):
            log.info("ApiVersions v%d from %s: invalid client software name/version %r/%r",
                     api_version, connection_id, name, version)
            return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
        log.debug("Connection %s: client software %s %s", connection_id, name, version)
    return ApiVersionsResponse(error_code=ErrorCode.NO_ERROR, api_keys=advertised_api_keys())


def answer_before_authentication(api_version: int, request: ApiVersionsRequest | None,
                                 connection_id: str) -> tuple[int, ApiVersionsResponse]:
    """ApiVersions on a SASL listener before authentication (answered by the
    authenticator, as Kafka's SaslServerAuthenticator does): (answer version, body)."""
    if request is None or not 0 <= api_version <= MAX_VERSION:
        return 0, unsupported_version_response()
    return api_version, api_versions_response(api_version, request, connection_id)


@api(ApiVersionsRequest.API_KEY, min_version=0, max_version=MAX_VERSION, request=ApiVersionsRequest)
async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> HandlerResult:
    return Respond(api_versions_response(ctx.api_version, request, ctx.connection_id))
