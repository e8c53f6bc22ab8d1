"""``minikafka configs`` for users and client ids (``cli.configs`` hands them here): SCRAM
credentials and client quotas, like kafka-configs.sh for ``--entity-type users|clients``.

Flags are kafka-configs' own: ``--bootstrap-server H:P``, ``--entity-type users|clients``
(twice for a user and client-id pair), ``--entity-name NAME`` or ``--entity-default`` (in
the same order as the types), one of ``--alter`` / ``--describe``, ``--add-config``
(``k=v`` pairs separated by commas, ``[...]`` grouping a value that holds commas) and
``--delete-config`` (names separated by commas).

- ``SCRAM-SHA-256=[password=...]`` (or ``[iterations=8192,password=...]``; Kafka's default
  4096 iterations) creates a user's credential: the salt is random and the password is
  salted here (PBKDF2), so only the salted form reaches the broker
  (AlterUserScramCredentials); ``--delete-config SCRAM-SHA-256`` removes it.
- ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage`` set quotas
  (AlterClientQuotas); ``--delete-config`` removes them.
- ``--describe`` prints Kafka's lines::

      Quota configs for user-principal 'alice' are producer_byte_rate=1024.0
      SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096

Errors print ``Error while executing config command with args '...'`` and exit 1.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from cli.common import add_connection_args, client_config, tool_config
from client import ClientError
from client.sync import SyncClient
from protocol.messages.alter_client_quotas import AlterClientQuotasRequest
from protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest

DEFAULT_TIMEOUT_MS = 30_000
SCRAM_MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32
ENTITY_TYPES = {"users": "user", "clients": "client-id"}
LABELS = {"user": "user-principal", "client-id": "client-id"}


class CommandError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="minikafka configs",
                                description="Add, remove or describe user and client-id configs.")
    add_connection_args(p)
    p.add_argument("--entity-type", action="append", default=[], choices=sorted(ENTITY_TYPES))
    names = p.add_argument_group("entity names, in the order of --entity-type")
    names.add_argument("--entity-name", action="append", dest="names", metavar="NAME",
                       type=lambda s: ("name", s))
    names.add_argument("--entity-default", action="append_const", dest="names", const=("default", None))
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true")
    action.add_argument("--describe", action="store_true")
    p.add_argument("--add-config", default="", metavar="K=V,...")
    p.add_argument("--delete-config", default="", metavar="K,...")
    p.add_argument("--command-timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS)
    return p


def parse_config_list(text: str) -> dict[str, str]:
    """kafka-configs' ``--add-config``: ``a=1,b=[x=1,y=2]`` -> {a: "1", b: "x=1,y=2"}."""
    out: dict[str, str] = {}
    depth, item = 0, ""
    items: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(item)
            item = ""
        else:
            item += ch
    if depth != 0:
        raise CommandError(f"unbalanced brackets in {text!r}")
    items.append(item)
    for entry in (i.strip() for i in items):
        if not entry:
            continue
        key, sep, value = entry.partition("=")
        if not sep:
            raise CommandError(f"Invalid entity config: all configs to be added must be in the format \"key=val\": {entry}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    types = [ENTITY_TYPES[t] for t in args.entity_type]
    names = args.names or []
    if not types or len(types) != len(names) or len(set(types)) != len(types):
        raise CommandError("give one --entity-name or --entity-default per --entity-type "
                           "(users, clients, or both)")
    pairs = sorted(zip(types, (n for _kind, n in names), strict=True),
                   key=lambda p: 0 if p[0] == "user" else 1)
    return pairs


def _scram_upsertion(user: str, mechanism: str, spec: str) -> AlterUserScramCredentialsRequest.ScramCredentialUpsertion:
    fields = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
    password = fields.get("password")
    if not password:
        raise CommandError(f"{mechanism} needs password=... (as [iterations=N,password=...])")
    iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    mechanism_type, digest = SCRAM_MECHANISMS[mechanism]
    salt = os.urandom(SALT_BYTES)
    salted = hashlib.pbkdf2_hmac(digest, password.encode("utf-8"), salt, iterations)
    return AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=user, mechanism=mechanism_type, iterations=iterations, salt=salt, salted_password=salted)


def _alter(client: SyncClient, entity: list[tuple[str, str | None]], add: dict[str, str],
           delete: list[str], out: TextIO) -> None:
    unknown = [k for k in [*add, *delete] if k not in SCRAM_MECHANISMS and k not in QUOTA_KEYS]
    if unknown:
        raise CommandError(f"Invalid config(s): {','.join(unknown)}")
    scram_keys = [k for k in [*add, *delete] if k in SCRAM_MECHANISMS]
    if scram_keys:
        if len(entity) != 1 or entity[0][0] != "user" or entity[0][1] is None:
            raise CommandError("SCRAM credentials belong to one named user (--entity-type users)")
        user = entity[0][1]
        request = AlterUserScramCredentialsRequest(
            upsertions=[_scram_upsertion(user, k, v) for k, v in add.items() if k in SCRAM_MECHANISMS],
            deletions=[AlterUserScramCredentialsRequest.ScramCredentialDeletion(
                name=user, mechanism=SCRAM_MECHANISMS[k][0]) for k in delete if k in SCRAM_MECHANISMS])
        for result in client.send(request).results:
            if result.error_code:
                raise CommandError(f"{result.error_message} (error {result.error_code})")
    quota_ops = [AlterClientQuotasRequest.OpData(key=k, value=float(v), remove=False)
                 for k, v in add.items() if k in QUOTA_KEYS]
    quota_ops += [AlterClientQuotasRequest.OpData(key=k, value=0.0, remove=True)
                  for k in delete if k in QUOTA_KEYS]
    if quota_ops:
        response = client.send(AlterClientQuotasRequest(validate_only=False, entries=[
            AlterClientQuotasRequest.EntryData(entity=[
                AlterClientQuotasRequest.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=quota_ops)]))
        for entry in response.entries:
            if entry.error_code:
                raise CommandError(f"{entry.error_message} (error {entry.error_code})")
    print(f"Completed updating config for {_describe_entity(entity)}.", file=out)


def _describe_entity(entity: list[tuple[str, str | None]]) -> str:
    names = {"user": "user", "client-id": "client"}
    return ", ".join(f"{names[t]} {'<default>' if n is None else n}" for t, n in entity)


def _label(entity: Sequence[tuple[str, str | None]]) -> str:
    return ", ".join(f"{LABELS[t]} '{'<default>' if n is None else n}'" for t, n in entity)


def _describe(client: SyncClient, entity: list[tuple[str, str | None]], out: TextIO) -> None:
    response = client.send(DescribeClientQuotasRequest(strict=True, components=[
        DescribeClientQuotasRequest.ComponentData(entity_type=t, match_type=1 if n is None else 0,
                                                  match=n) for t, n in entity]))
    if response.error_code:
        raise CommandError(f"{response.error_message} (error {response.error_code})")
    values = {v.key: v.value for e in response.entries or [] for v in e.values}
    print(f"Quota configs for {_label(entity)} are "
          + ", ".join(f"{k}={v}" for k, v in sorted(values.items())), file=out)
    if len(entity) == 1 and entity[0][0] == "user" and entity[0][1] is not None:
        scram = client.send(DescribeUserScramCredentialsRequest(
            users=[DescribeUserScramCredentialsRequest.UserName(name=entity[0][1])]))
        names = {t: name for name, (t, _d) in SCRAM_MECHANISMS.items()}
        infos = [f"{names.get(i.mechanism, i.mechanism)}=iterations={i.iterations}"
                 for r in scram.results if not r.error_code for i in r.credential_infos]
        if infos:
            print(f"SCRAM credential configs for {_label(entity)} are {', '.join(infos)}", file=out)


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(raw)
    try:
        entity = _entity(args)
        with SyncClient(args.bootstrap_server, client_config(args, tool_config(args.command_timeout_ms))) as client:
            if args.alter:
                add = parse_config_list(args.add_config)
                delete = [k.strip() for k in args.delete_config.split(",") if k.strip()]
                if not add and not delete:
                    raise CommandError("--alter needs --add-config or --delete-config")
                _alter(client, entity, add, delete, out)
            else:
                _describe(client, entity, out)
    except (CommandError, ClientError, OSError, ValueError) as exc:
        print(f"Error while executing config command with args '{' '.join(raw)}'", file=out)
        print(str(exc), file=out)
        return 1
    return 0
