"""SCRAM credentials (SCRAM-SHA-256, SCRAM-SHA-512), kept as user entity configs.

Each credential is the user entity's config under the mechanism's name, in Kafka's
``ScramCredentialUtils`` form: ``salt=<base64>,stored_key=<base64>,server_key=<base64>,
iterations=<n>`` (so a ZooKeeper store holds exactly what Kafka writes to
``/config/users/<user>``). The broker never sees passwords: AlterUserScramCredentials
carries the salted password (the client runs PBKDF2), from which the stored and server keys
are derived (RFC 5802).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Final

from broker.security.entity_store import EntityConfigStore, user_entity

# Kafka's ScramMechanism types (AlterUserScramCredentials, DescribeUserScramCredentials).
MECHANISM_TYPES: Final = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_IDS: Final = {name: t for t, name in MECHANISM_TYPES.items()}
_HASHES: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS: Final = 4096
MAX_ITERATIONS: Final = 16384
# The SCRAM library (scramp) refuses salts shorter than this (Kafka's clients send 16+).
MIN_SALT_BYTES: Final = 12


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_config(cls, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(","))
        return cls(base64.b64decode(fields["salt"], validate=True),
                   base64.b64decode(fields["stored_key"], validate=True),
                   base64.b64decode(fields["server_key"], validate=True),
                   int(fields["iterations"]))

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted_password: bytes,
                             iterations: int) -> ScramCredential:
        digest = _HASHES[mechanism]
        client_key = hmac.digest(salted_password, b"Client Key", digest)
        stored_key = hashlib.new(digest, client_key).digest()
        server_key = hmac.digest(salted_password, b"Server Key", digest)
        return cls(salt, stored_key, server_key, iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, salt: bytes,
                      iterations: int) -> ScramCredential:
        salted = hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode("utf-8"), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)


class CredentialStore:
    """SCRAM credentials by user over an ``EntityConfigStore`` (local file or ZooKeeper)."""

    def __init__(self, entities: EntityConfigStore) -> None:
        self.entities = entities
        # Held by an alteration from planning to writing (on the event loop).
        self.alter_lock = asyncio.Lock()

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self.entities.get(user_entity(user)).get(mechanism)
        if text is None:
            return None
        try:
            return ScramCredential.from_config(text)
        except (ValueError, KeyError):
            return None
