"""``minikafka acls``: add, remove and list ACLs, like kafka-acls.sh (through CreateAcls,
DeleteAcls and DescribeAcls, so it works on any broker with an authorizer).

Flags are kafka-acls' own: ``--bootstrap-server H:P``, one of ``--add`` / ``--remove`` /
``--list``; principals ``--allow-principal`` / ``--deny-principal`` (``User:alice``,
``User:*``) with ``--allow-host`` / ``--deny-host`` (default ``*``); ``--operation``
(repeatable: Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs,
AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, All; default All); resources
``--topic``, ``--group``, ``--transactional-id``, ``--delegation-token``
(repeatable), ``--cluster``; ``--resource-pattern-type`` literal (default) / prefixed, and
for list and remove also any / match; ``--principal`` to list one principal's ACLs;
``--producer`` (Write, Describe, Create on the topics; with ``--idempotent``,
IdempotentWrite on the cluster) and ``--consumer`` (Read, Describe on the topics, Read on
the groups); ``--force`` (kafka-acls asks before removing; this tool never asks).

Output is kafka-acls'::

    Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:
     \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

Errors print ``Error while executing ACL command: <message>`` and exit 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from cli.common import add_connection_args, client_config, tool_config
from client import ClientError
from client.sync import SyncClient
from protocol.messages.create_acls import CreateAclsRequest
from protocol.messages.delete_acls import DeleteAclsRequest
from protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse

DEFAULT_TIMEOUT_MS = 30_000
# Kafka's codes (org.apache.kafka.common.acl / .resource).
RESOURCE_TYPES = {"ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5,
                  "DELEGATION_TOKEN": 6, "USER": 7}
PATTERN_TYPES = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATIONS = {"ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7,
              "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
              "IDEMPOTENT_WRITE": 12, "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}
PERMISSIONS = {"ANY": 1, "DENY": 2, "ALLOW": 3}
CLUSTER_NAME = "kafka-cluster"

Resource = tuple[int, str, int]  # resource type, name, pattern type
Entry = tuple[str, str, int, int]  # principal, host, operation, permission


class CommandError(Exception):
    pass


def _names(codes: dict[str, int]) -> dict[int, str]:
    return {v: k for k, v in codes.items()}


def _operation(text: str) -> int:
    key = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(text)).upper()
    if key not in OPERATIONS or key == "ANY":
        raise CommandError(f"Invalid operation: {text}")
    return OPERATIONS[key]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="minikafka acls", description="Manage ACLs (like kafka-acls).")
    add_connection_args(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("add", "remove", "list"):
        action.add_argument(f"--{name}", action="store_true")
    for flag in ("allow-principal", "deny-principal", "allow-host", "deny-host", "operation",
                 "topic", "group", "transactional-id", "delegation-token", "principal"):
        p.add_argument(f"--{flag}", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", default="literal",
                   choices=["literal", "prefixed", "any", "match"], type=str.lower)
    p.add_argument("--producer", action="store_true")
    p.add_argument("--consumer", action="store_true")
    p.add_argument("--idempotent", action="store_true")
    p.add_argument("--force", action="store_true")
    p.add_argument("--command-timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS)
    return p


def _resources(args: argparse.Namespace, pattern: int) -> list[Resource]:
    out = [(RESOURCE_TYPES["TOPIC"], t, pattern) for t in args.topic]
    out += [(RESOURCE_TYPES["GROUP"], g, pattern) for g in args.group]
    out += [(RESOURCE_TYPES["TRANSACTIONAL_ID"], t, pattern) for t in args.transactional_id]
    out += [(RESOURCE_TYPES["DELEGATION_TOKEN"], t, pattern) for t in args.delegation_token]
    if args.cluster:
        out.append((RESOURCE_TYPES["CLUSTER"], CLUSTER_NAME, pattern))
    return out


def _entries(args: argparse.Namespace, operations: list[int]) -> list[Entry]:
    out: list[Entry] = []
    for permission, principals, hosts in (("ALLOW", args.allow_principal, args.allow_host),
                                          ("DENY", args.deny_principal, args.deny_host)):
        for principal in principals:
            if ":" not in principal:
                raise CommandError(f"Invalid principal {principal!r}: expected Type:name")
            out += [(principal, host, op, PERMISSIONS[permission])
                    for host in (hosts or ["*"]) for op in operations]
    return out


def _bindings(args: argparse.Namespace, pattern: int) -> dict[Resource, list[Entry]]:
    """What --add / --remove with principals mean, per resource (the convenience options too)."""
    operations = [_operation(o) for o in args.operation] or [OPERATIONS["ALL"]]
    out: dict[Resource, list[Entry]] = {}
    if args.producer or args.consumer:
        topic_ops = ["WRITE", "DESCRIBE", "CREATE"] if args.producer else ["READ", "DESCRIBE"]
        for t in args.topic:
            out[(RESOURCE_TYPES["TOPIC"], t, pattern)] = _entries(args, [OPERATIONS[o] for o in topic_ops])
        if args.consumer:
            for g in args.group:
                out[(RESOURCE_TYPES["GROUP"], g, pattern)] = _entries(args, [OPERATIONS["READ"]])
        if args.producer and args.idempotent:
            out[(RESOURCE_TYPES["CLUSTER"], CLUSTER_NAME, PATTERN_TYPES["LITERAL"])] = _entries(
                args, [OPERATIONS["IDEMPOTENT_WRITE"]])
        return out
    for resource in _resources(args, pattern):
        out[resource] = _entries(args, operations)
    return out


def _pattern_text(resource: Resource) -> str:
    rt, name, pt = resource
    return (f"ResourcePattern(resourceType={_names(RESOURCE_TYPES)[rt]}, name={name}, "
            f"patternType={_names(PATTERN_TYPES)[pt]})")


def _entry_text(entry: Entry) -> str:
    principal, host, op, perm = entry
    return (f"(principal={principal}, host={host}, operation={_names(OPERATIONS)[op]}, "
            f"permissionType={_names(PERMISSIONS)[perm]})")


def _describe(client: SyncClient, resource_type: int, name: str | None, pattern: int,
              principal: str | None = None) -> dict[Resource, list[Entry]]:
    response: DescribeAclsResponse = client.send(DescribeAclsRequest(
        resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern,
        principal_filter=principal, host_filter=None, operation=OPERATIONS["ANY"],
        permission_type=PERMISSIONS["ANY"]))
    if response.error_code:
        raise CommandError(f"{response.error_message} (error {response.error_code})")
    out: dict[Resource, list[Entry]] = {}
    for r in response.resources:
        out[(r.resource_type, r.resource_name, r.pattern_type)] = [
            (a.principal, a.host, a.operation, a.permission_type) for a in r.acls]
    return out


def _print_acls(acls: dict[Resource, list[Entry]], out: TextIO) -> None:
    for resource, entries in acls.items():
        print(f"Current ACLs for resource `{_pattern_text(resource)}`: ", file=out)
        for entry in entries:
            print(f" \t{_entry_text(entry)} ", file=out)
        print(file=out)


def _add(client: SyncClient, args: argparse.Namespace, out: TextIO) -> None:
    if args.resource_pattern_type not in ("literal", "prefixed"):
        raise CommandError("A '--resource-pattern-type' value of 'literal' or 'prefixed' is "
                           "required to add ACLs")
    bindings = _bindings(args, PATTERN_TYPES[args.resource_pattern_type.upper()])
    if not bindings or not any(bindings.values()):
        raise CommandError("You must specify a resource and one of --allow-principal or "
                           "--deny-principal when trying to add ACLs.")
    for resource, entries in bindings.items():
        print(f"Adding ACLs for resource `{_pattern_text(resource)}`: ", file=out)
        for entry in entries:
            print(f" \t{_entry_text(entry)} ", file=out)
        print(file=out)
        response = client.send(CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=resource[0], resource_name=resource[1], resource_pattern_type=resource[2],
            principal=e[0], host=e[1], operation=e[2], permission_type=e[3]) for e in entries]))
        for result in response.results:
            if result.error_code:
                raise CommandError(f"{result.error_message} (error {result.error_code})")
    _print_acls({r: v for resource in bindings
                 for r, v in _describe(client, resource[0], resource[1], resource[2]).items()}, out)


def _remove(client: SyncClient, args: argparse.Namespace, out: TextIO) -> None:
    pattern = PATTERN_TYPES[args.resource_pattern_type.upper()]
    filters: list[DeleteAclsRequest.DeleteAclsFilter] = []
    if args.allow_principal or args.deny_principal:
        for resource, entries in _bindings(args, pattern).items():
            for principal, host, op, perm in entries:
                filters.append(DeleteAclsRequest.DeleteAclsFilter(
                    resource_type_filter=resource[0], resource_name_filter=resource[1],
                    pattern_type_filter=resource[2], principal_filter=principal, host_filter=host,
                    operation=op, permission_type=perm))
            print(f"Removing ACLs from resource `{_pattern_text(resource)}`", file=out)
    else:
        for resource in _resources(args, pattern):
            filters.append(DeleteAclsRequest.DeleteAclsFilter(
                resource_type_filter=resource[0], resource_name_filter=resource[1],
                pattern_type_filter=resource[2], principal_filter=None, host_filter=None,
                operation=OPERATIONS["ANY"], permission_type=PERMISSIONS["ANY"]))
            print(f"Removing all ACLs from resource `{_pattern_text(resource)}`", file=out)
    if not filters:
        raise CommandError("You must specify a resource to remove ACLs from.")
    response = client.send(DeleteAclsRequest(filters=filters))
    for result in response.filter_results:
        if result.error_code:
            raise CommandError(f"{result.error_message} (error {result.error_code})")


def _list(client: SyncClient, args: argparse.Namespace, out: TextIO) -> None:
    principal = args.principal[0] if args.principal else None
    pattern = PATTERN_TYPES[args.resource_pattern_type.upper()] if args.resource_pattern_type != "literal" \
        or _resources(args, 0) else PATTERN_TYPES["ANY"]
    resources = _resources(args, pattern)
    found: dict[Resource, list[Entry]] = {}
    if resources:
        for resource in resources:
            found.update(_describe(client, resource[0], resource[1], resource[2], principal))
    else:
        found = _describe(client, RESOURCE_TYPES["ANY"], None, PATTERN_TYPES["ANY"], principal)
    _print_acls(found, out)


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        with SyncClient(args.bootstrap_server, client_config(args, tool_config(args.command_timeout_ms))) as client:
            if args.add:
                _add(client, args, out)
            elif args.remove:
                _remove(client, args, out)
            else:
                _list(client, args, out)
    except (CommandError, ClientError, OSError) as exc:
        print(f"Error while executing ACL command: {exc}", file=out)
        return 1
    return 0
