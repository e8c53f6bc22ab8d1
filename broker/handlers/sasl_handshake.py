"""SaslHandshake: v0-1.

Behavior:
- On a SASL listener the handshake never reaches this handler: the connection's
  authenticator answers it (broker.security.sasl.authenticator), before authentication
  and when it starts a re-authentication.
- Anywhere else (a PLAINTEXT or SSL listener, or an authenticated connection whose session
  cannot be re-authenticated) the answer is ILLEGAL_SASL_STATE, as Kafka's KafkaApis gives.

Version notes:
- v0: the SASL tokens that follow travel as raw frames; v1: in SaslAuthenticate requests.
"""

from __future__ import annotations

from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from protocol.errors import ErrorCode
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse


@api(SaslHandshakeRequest.API_KEY, min_version=0, max_version=1, request=SaslHandshakeRequest)
async def handle_sasl_handshake(ctx: RequestContext, request: SaslHandshakeRequest) -> HandlerResult:
    return Respond(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]))
