"""DescribeUserScramCredentials and AlterUserScramCredentials over the credential store, with
Kafka's checks, order and messages (its ``ZkAdminManager``):

Describe: no users (null or empty) -> every user that has a SCRAM credential, sorted; else
each requested user once: empty name -> RESOURCE_NOT_FOUND "Username must not be empty",
asked twice -> DUPLICATE_RESOURCE, no credential -> RESOURCE_NOT_FOUND "Attempt to describe
a user credential that does not exist: <user>".

Alter, per user (a user with any bad item fails as a whole): empty name ->
UNACCEPTABLE_CREDENTIAL "Username must not be empty"; unknown mechanism ->
UNSUPPORTED_SASL_MECHANISM; iterations outside [4096, 16384] -> UNACCEPTABLE_CREDENTIAL
("Too few iterations" / "Too many iterations"); the same (user, mechanism) twice ->
DUPLICATE_RESOURCE; deleting a credential that does not exist -> RESOURCE_NOT_FOUND. Not
in Kafka: a salt under 12 bytes -> UNACCEPTABLE_CREDENTIAL (the SCRAM exchange refuses such
salts, so the credential could never be used; Kafka's clients send 16 bytes or more).
Every other user's changes are written in one atomic store update.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from broker.security.credentials import (
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    MIN_SALT_BYTES,
    CredentialStore,
    ScramCredential,
)
from broker.security.entity_store import Entity, user_entity
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsResponse

EMPTY_USER = "Username must not be empty"

DescribeResult = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
CredentialInfo = DescribeUserScramCredentialsResponse.CredentialInfo


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error_code: int
    error_message: str | None


def _infos(store: CredentialStore, user: str) -> list[CredentialInfo]:
    config = store.entities.get(user_entity(user))
    out = []
    for mechanism_type, name in sorted(MECHANISM_TYPES.items()):
        text = config.get(name)
        if text is not None:
            out.append(CredentialInfo(mechanism=mechanism_type,
                                      iterations=ScramCredential.from_config(text).iterations))
    return out


def describe(store: CredentialStore, users: list[str] | None) -> list[DescribeResult]:
    if not users:
        found = sorted(e[0][1] for e, c in store.entities.all().items()
                       if len(e) == 1 and e[0][1] is not None and any(m in c for m in MECHANISM_IDS))
        return [DescribeResult(user=u, error_code=0, error_message="",
                               credential_infos=_infos(store, u)) for u in found if u is not None]
    counts = Counter(users)
    results: dict[str, DescribeResult] = {}
    for user in users:
        if user in results:
            continue
        if not user:
            results[user] = DescribeResult(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                           error_message=EMPTY_USER)
        elif counts[user] > 1:
            results[user] = DescribeResult(
                user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message="Cannot describe SCRAM credentials for the same user twice in a "
                              f"single request: {user}")
        else:
            infos = _infos(store, user)
            results[user] = (DescribeResult(user=user, error_code=0, error_message="",
                                            credential_infos=infos) if infos else
                             DescribeResult(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                            error_message="Attempt to describe a user credential "
                                                          f"that does not exist: {user}"))
    return list(results.values())


def plan_alter(store: CredentialStore,
               deletions: list[AlterUserScramCredentialsRequest.ScramCredentialDeletion],
               upsertions: list[AlterUserScramCredentialsRequest.ScramCredentialUpsertion],
               ) -> tuple[list[UserResult], dict[Entity, dict[str, str | None]], list[str]]:
    """(failed users' results, the store changes for the others, the others' names)."""
    failed: dict[str, UserResult] = {}

    def fail(user: str, code: int, message: str) -> None:
        failed.setdefault(user, UserResult(user, code, message))

    for d in deletions:
        if not d.name:
            fail(d.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, EMPTY_USER)
        elif d.mechanism not in MECHANISM_TYPES:
            fail(d.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for u in upsertions:
        if not u.name:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, EMPTY_USER)
        elif u.mechanism not in MECHANISM_TYPES:
            fail(u.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif u.iterations > MAX_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif u.iterations < MIN_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif len(u.salt) < MIN_SALT_BYTES:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL,
                 f"Salt too short (at least {MIN_SALT_BYTES} bytes)")
    pairs = Counter([(d.name, d.mechanism) for d in deletions if d.name not in failed]
                    + [(u.name, u.mechanism) for u in upsertions if u.name not in failed])
    for (user, _mechanism), count in pairs.items():
        if count > 1:
            fail(user, ErrorCode.DUPLICATE_RESOURCE,
                 "A user credential cannot be altered twice in the same request")
    for d in deletions:
        if d.name not in failed and MECHANISM_TYPES[d.mechanism] not in store.entities.get(
                user_entity(d.name)):
            fail(d.name, ErrorCode.RESOURCE_NOT_FOUND,
                 "Attempt to delete a user credential that does not exist")
    changes: dict[Entity, dict[str, str | None]] = {}
    for d in deletions:
        if d.name not in failed:
            changes.setdefault(user_entity(d.name), {})[MECHANISM_TYPES[d.mechanism]] = None
    for u in upsertions:
        if u.name not in failed:
            mechanism = MECHANISM_TYPES[u.mechanism]
            credential = ScramCredential.from_salted_password(
                mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations)
            changes.setdefault(user_entity(u.name), {})[mechanism] = credential.to_config()
    altered = sorted({e[0][1] for e in changes if e[0][1] is not None})
    return list(failed.values()), changes, [u for u in altered if u is not None]
