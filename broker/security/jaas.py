"""JAAS configuration text, as Kafka reads ``sasl.jaas.config`` (its ``JaasConfig`` parser)::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

One or more entries ``<login module class> <flag> (<key>=<value>)* ;``; the flag is one of
required, requisite, sufficient, optional; values are words or double-quoted strings
(``\\"`` and ``\\\\`` escapes); ``//`` and ``/* */`` comments are skipped. A broker's
per-listener, per-mechanism property must hold exactly one entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

FLAGS: Final = frozenset({"required", "requisite", "sufficient", "optional"})
_TOKEN: Final = re.compile(r'''
    \s+ | //[^\n]* | /\*.*?\*/            # blanks and comments: skipped
  | (?P<quoted>"(?:[^"\\]|\\.)*")
  | (?P<punct>[=;])
  | (?P<word>[^\s=;"]+)
''', re.VERBOSE | re.DOTALL)


class JaasError(ValueError):
    """The text is not a valid JAAS configuration."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise JaasError(f"unexpected character {text[pos]!r} at position {pos}")
        pos = match.end()
        if match.group("quoted") is not None:
            out.append(("value", re.sub(r"\\(.)", r"\1", match.group("quoted")[1:-1])))
        elif match.group("punct") is not None:
            out.append((match.group("punct"), match.group("punct")))
        elif match.group("word") is not None:
            out.append(("word", match.group("word")))
    return out


def parse(text: str) -> list[LoginModule]:
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    i = 0

    def take(kinds: tuple[str, ...], what: str) -> str:
        nonlocal i
        if i >= len(tokens) or tokens[i][0] not in kinds:
            found = tokens[i][1] if i < len(tokens) else "end of text"
            raise JaasError(f"expected {what}, found {found!r}")
        i += 1
        return tokens[i - 1][1]

    while i < len(tokens):
        class_name = take(("word",), "a login module class name")
        flag = take(("word",), "a control flag").lower()
        if flag not in FLAGS:
            raise JaasError(f"invalid control flag {flag!r} (one of {', '.join(sorted(FLAGS))})")
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i][0] != ";":
            key = take(("word",), "an option name")
            take(("=",), "'='")
            options[key] = take(("word", "value"), f"a value for {key}")
        take((";",), "';'")
        modules.append(LoginModule(class_name, flag, options))
    if not modules:
        raise JaasError("no login module")
    return modules


def parse_one(text: str) -> LoginModule:
    """The one entry a broker's ``listener.name.<l>.<mechanism>.sasl.jaas.config`` holds."""
    modules = parse(text)
    if len(modules) != 1:
        raise JaasError(f"JAAS config property contains {len(modules)} login modules, should be 1 module")
    return modules[0]
