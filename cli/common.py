"""What the command-line tools share: how they make their client."""

from __future__ import annotations

from typing import Final

from client import ClientConfig

TOOLS_CLIENT_ID: Final = "minikafka-tools"
_DEFAULTS: Final = ClientConfig()


def tool_config(timeout_ms: int, client_id: str = TOOLS_CLIENT_ID) -> ClientConfig:
    """A client whose every call (retries included) ends within ``timeout_ms``."""
    return ClientConfig(
        client_id=client_id,
        default_api_timeout_ms=timeout_ms,
        request_timeout_ms=min(timeout_ms, _DEFAULTS.request_timeout_ms),
        connection_setup_timeout_ms=min(timeout_ms, _DEFAULTS.connection_setup_timeout_ms),
    )
