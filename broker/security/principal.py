"""Who a connection is: Kafka's ``KafkaPrincipal`` (type and name, printed ``User:alice``).

The principal comes from the listener's security protocol, as in Kafka's
``DefaultKafkaPrincipalBuilder``: PLAINTEXT -> ``User:ANONYMOUS``; SSL -> ``User:`` + the
client certificate's distinguished name mapped by ``ssl.principal.mapping.rules``
(``User:ANONYMOUS`` without a client certificate); SASL_* -> ``User:`` + the authenticated
user name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

USER_TYPE: Final = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``Type:name`` (Kafka's ``SecurityUtils.parseKafkaPrincipal``); ValueError otherwise."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"expected a principal of the form Type:name, got {text!r}")
        return cls(kind, name)


ANONYMOUS: Final = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)
