"""SaslAuthenticate: v0-2.

Behavior:
- During authentication on a SASL listener the connection's authenticator answers it
  (broker.security.sasl.authenticator): tokens of PLAIN or SCRAM, SASL_AUTHENTICATION_FAILED
  on bad credentials, ``session_lifetime_ms`` from ``connections.max.reauth.ms``.
- Reaching this handler means the connection is not authenticating: ILLEGAL_SASL_STATE,
  "SaslAuthenticate request received after successful authentication" (Kafka's words).

Version notes:
- v1 adds ``session_lifetime_ms`` (KIP-368); v2 is the flexible version.
"""

from __future__ import annotations

from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from protocol.errors import ErrorCode
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse


@api(SaslAuthenticateRequest.API_KEY, min_version=0, max_version=2, request=SaslAuthenticateRequest)
async def handle_sasl_authenticate(ctx: RequestContext,
                                   request: SaslAuthenticateRequest) -> HandlerResult:
    return Respond(SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"", session_lifetime_ms=0))
