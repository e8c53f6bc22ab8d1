"""``ssl.principal.mapping.rules``: a client certificate's distinguished name -> user name.

Kafka's ``SslPrincipalMapper``: a comma-separated list of rules tried in order, the first
that matches wins; ``DEFAULT`` returns the DN unchanged; ``RULE:pattern/replacement/[LU]``
applies when ``pattern`` matches the whole DN, replaces every match of it by
``replacement`` (``$1`` back references; a reference to a group the pattern lacks is kept
as literal text, as Kafka does) and lower- (``L``) or upper-cases (``U``) the result. No
matching rule fails the connection's authentication. Patterns are Java regular expressions;
the constructs DN rules use (classes, groups, quantifiers, anchors) read the same in
Python's ``re``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_RULE: Final = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER: Final = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER: Final = re.compile(_RULE)


class NoMatchingRule(ValueError):
    """No rule applies to the distinguished name."""


@dataclass(frozen=True, slots=True)
class _Rule:
    is_default: bool
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    lower: bool = False
    upper: bool = False

    def __str__(self) -> str:
        if self.is_default:
            return "DEFAULT"
        assert self.pattern is not None
        flag = "/L" if self.lower else "/U" if self.upper else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{flag}"

    def apply(self, dn: str) -> str | None:
        if self.is_default:
            return dn
        assert self.pattern is not None
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(lambda m: _expand(self.replacement, m), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result


def _expand(replacement: str, match: re.Match[str]) -> str:
    """Java's ``Matcher.appendReplacement`` (``$n`` groups, ``\\x`` literal x), with Kafka's
    treatment of references to groups the pattern does not have (kept literally)."""
    groups = match.re.groups
    out: list[str] = []
    i = 0
    while i < len(replacement):
        ch = replacement[i]
        if ch == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif ch == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 1
            number = int(replacement[j])
            j += 1
            if number > groups:
                out.append(replacement[i:j])  # a group the pattern lacks: literal text
                i = j
                continue
            while j < len(replacement) and replacement[j].isdigit():
                longer = number * 10 + int(replacement[j])
                if longer > groups:
                    break
                number = longer
                j += 1
            out.append(match.group(number) or "")
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    def __init__(self, rules: str | None) -> None:
        self._rules = _parse_rules(_split_rules("DEFAULT" if rules is None else rules))

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self._rules))}])"

    def name(self, dn: str) -> str:
        for rule in self._rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}")


def _split_rules(rules: str) -> list[str]:
    return [m.group(1) for m in _SPLITTER.finditer(rules.strip())]


def _parse_rules(rules: list[str]) -> list[_Rule]:
    out: list[_Rule] = []
    for rule in rules:
        match = _PARSER.match(rule)
        if match is None or match.end() != len(rule):
            unmatched = rule if match is None else rule[match.end():]
            raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{unmatched}`")
        if match.group(1) is not None:
            out.append(_Rule(True))
        elif match.group(2) is not None:
            try:
                pattern = re.compile(match.group(2))
            except re.error as exc:
                raise ValueError(f"Invalid rule: `{rule}`: {exc}") from None
            flag = match.group(6)
            out.append(_Rule(False, pattern, match.group(4), flag == "L", flag == "U"))
        # else: an empty rule, ignored (as Kafka does)
    return out
