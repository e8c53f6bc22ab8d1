"""Broker properties from ``MINIKAFKA_*`` environment variables (containers), in the scheme of
Kafka's own images (``KAFKA_*``): drop the prefix, lower-case, then ``_`` is ``.``, ``__`` is
``_`` and ``___`` is ``-``::

    MINIKAFKA_LOG_DIRS=/data                        -> log.dirs=/data
    MINIKAFKA_LISTENER_SECURITY_PROTOCOL_MAP=...    -> listener.security.protocol.map=...
    MINIKAFKA_LISTENER_NAME_INTERNAL_SSL_KEYSTORE__TYPE -> listener.name.internal.ssl.keystore_type

The broker's own switches (``RESERVED``: logging, test hooks) are not properties. Precedence:
``--config`` file < environment < ``--override``. An unknown property fails start-up like a
bad ``--override``, naming the variable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

PREFIX: Final = "MINIKAFKA_"
RESERVED: Final = frozenset({
    "MINIKAFKA_LOG_LEVEL", "MINIKAFKA_LOG_LEVELS", "MINIKAFKA_FETCH_COPY", "MINIKAFKA_KAFKA_LIBS",
    "MINIKAFKA_FULL_COMMIT_TEST",
    "MINIKAFKA_IO_URING",  # "0": the turn's answers written one call each (broker.network.uring_send)
    # which build runs: storage.cleaner_native, protocol.native (not broker properties)
    "MINIKAFKA_CLEANER_SCAN", "MINIKAFKA_REQUEST_PATH",
})
RESERVED_PREFIXES: Final = ("MINIKAFKA_TEST_",)
_UNDERSCORES: Final = re.compile(r"_+")
_SEPARATORS: Final = {1: ".", 2: "_", 3: "-"}


class EnvConfigError(ValueError):
    pass


def property_name(variable: str) -> str:
    """``MINIKAFKA_LOG_DIRS`` -> ``log.dirs``; EnvConfigError for a name that does not map."""
    body = variable[len(PREFIX):]
    if not body or body.startswith("_") or body.endswith("_"):
        raise EnvConfigError(f"{variable}: not a property name")

    def separator(match: re.Match[str]) -> str:
        sep = _SEPARATORS.get(len(match.group(0)))
        if sep is None:
            raise EnvConfigError(f"{variable}: {len(match.group(0))} underscores in a row mean nothing")
        return sep

    return _UNDERSCORES.sub(separator, body.lower())


def broker_overrides(environ: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(variable, property, value) for each ``MINIKAFKA_*`` property variable, sorted."""
    out = []
    for variable in sorted(environ):
        if not variable.startswith(PREFIX) or variable in RESERVED or variable.startswith(RESERVED_PREFIXES):
            continue
        out.append((variable, property_name(variable), environ[variable]))
    return out
