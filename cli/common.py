"""What the command-line tools share: connection flags, their client's settings, output.

``--bootstrap-server`` and ``--command-config`` (a properties file of client settings, by
Kafka's names: ``client.id``, ``request.timeout.ms``, ``security.protocol``, ...) are taken
by every tool, as by Kafka's. A setting the client does not use is named in one WARN line
on stderr, as Kafka's clients log it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Final, TextIO

from client import ClientConfig, ClientError
from client.config import unused_properties
from client.properties import PropertiesError, load_properties

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


def add_connection_args(parser: argparse.ArgumentParser, *, config_flag: str = "--command-config") -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST1:PORT1,...",
                        help="REQUIRED: the broker(s) to connect to")
    parser.add_argument(config_flag, dest="command_config", metavar="FILE", default=None,
                        help="a properties file of client settings (Kafka's names, e.g. client.id, "
                             "request.timeout.ms, security.protocol)")


def read_properties(path: str | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        return load_properties(path)
    except PropertiesError as exc:
        raise ClientError("INVALID_CONFIG", f"Cannot read {exc}") from None


def client_config(args: argparse.Namespace, base: ClientConfig, *,
                  extra: Mapping[str, str] | None = None, err: TextIO | None = None) -> ClientConfig:
    """``base`` with the settings of ``--command-config`` (and ``extra``, which wins)."""
    props = read_properties(getattr(args, "command_config", None))
    props.update(extra or {})
    unused = unused_properties(props)
    if unused:
        print(f"WARN These configurations '[{', '.join(unused)}]' were supplied but are not used.",
              file=err or sys.stderr)
    return ClientConfig.from_properties(props, base)


def key_values(items: list[str], what: str) -> dict[str, str]:
    """``k=v`` arguments (``--property``, ``--producer-property``) as a dict."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ClientError("INVALID_CONFIG", f"Invalid {what} '{item}': expected key=value")
        out[key.strip()] = value
    return out
