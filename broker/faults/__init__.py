"""Faults a test arms on a broker running in its own process (kfake's ``ControlKey`` for
Python): the next N requests of an API answered with an error code, their responses
delayed, or their connections dropped.

Off unless asked for: only Python code in the broker's process creates a ``FaultInjector``
and hands it to ``BrokerServer(faults=...)`` (the pytest plugin does, when a fixture turns
faults on). No property, request or listener reaches it, so a broker started from the
command line has none and nothing over the network can arm one.

Rules are armed from the test's thread and consumed on the broker's event loop (one lock).
Each request of an API takes the first armed rule of that API whose ``when`` accepts it;
a rule is spent after ``count`` requests. What the request channel does with it:

- ``Fail(response)``: the response is sent instead of running the handler (nothing is
  appended, committed or changed); Produce with acks=0 has no response, so its connection
  is closed, as Kafka answers an acks=0 error;
- ``Drop()``: the connection is closed without an answer (the client sees a network error);
- ``Delay(delay_ms)``: the handler runs; its response is written ``delay_ms`` later (the
  connection stays muted meanwhile, so later requests on it wait too, as on a slow broker).

Every request is counted per API (``count``), armed or not, so a test can assert that a
client retried.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from broker.faults.responses import error_response, supports
from protocol.errors import ErrorCode
from protocol.messages import API_NAMES

__all__ = ["MAX_DELAY_MS", "MAX_RULES", "Delay", "Drop", "Fail", "FaultAction", "FaultInjector",
           "api_key_of", "error_code_of"]

# Bounds: a rule cannot hold a response longer than this, and at most this many rules wait.
MAX_DELAY_MS = 300_000
MAX_RULES = 1_000
_PRODUCE = 0
_KEYS_BY_NAME = {name.lower(): key for key, name in API_NAMES.items()}


@dataclass(frozen=True, slots=True)
class Fail:
    response: Any  # the generated response message to send instead


@dataclass(frozen=True, slots=True)
class Drop:
    pass


@dataclass(frozen=True, slots=True)
class Delay:
    delay_ms: int


FaultAction: TypeAlias = Fail | Drop | Delay


def api_key_of(api: int | str) -> int:
    """An API by key or by Kafka's name (``"Produce"``, ``"FindCoordinator"``; any case)."""
    if isinstance(api, int):
        if api not in API_NAMES:
            raise ValueError(f"unknown api key {api}")
        return api
    key = _KEYS_BY_NAME.get(api.replace("_", "").lower())
    if key is None:
        raise ValueError(f"unknown API {api!r} (Kafka's names: Produce, Fetch, Metadata, ...)")
    return key


def error_code_of(error: int | str) -> int:
    """An error by code or by Kafka's name (``"NOT_LEADER_OR_FOLLOWER"``)."""
    if isinstance(error, str):
        try:
            return int(ErrorCode[error.upper()])
        except KeyError:
            raise ValueError(f"unknown error {error!r} (Kafka's names: "
                             "NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, ...)") from None
    return int(ErrorCode(error))


@dataclass(eq=False, slots=True)
class _Rule:
    api_key: int
    remaining: int
    kind: str  # "fail" | "drop" | "delay"
    error_code: int = 0
    delay_ms: int = 0
    when: Callable[[Any], bool] | None = None


class FaultInjector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._seen: Counter[int] = Counter()

    # -- arming (any thread) -----------------------------------------------------------

    def fail_next(self, api: int | str, error: int | str, count: int = 1, *,
                  when: Callable[[Any], bool] | None = None) -> None:
        """The next ``count`` requests of ``api`` (that ``when`` accepts, given the decoded
        request) are answered with ``error`` on every entry, without being handled."""
        key = api_key_of(api)
        if not supports(key):
            raise ValueError(f"{API_NAMES[key]} responses carry no error code")
        self._arm(_Rule(key, _count(count), "fail", error_code=error_code_of(error), when=when))

    def drop_next(self, api: int | str, count: int = 1, *,
                  when: Callable[[Any], bool] | None = None) -> None:
        """The next ``count`` requests of ``api`` get no answer: their connection is closed."""
        self._arm(_Rule(api_key_of(api), _count(count), "drop", when=when))

    def delay_next(self, api: int | str, delay_ms: int, count: int = 1, *,
                   when: Callable[[Any], bool] | None = None) -> None:
        """The responses to the next ``count`` requests of ``api`` go out ``delay_ms`` late."""
        if not 0 <= delay_ms <= MAX_DELAY_MS:
            raise ValueError(f"delay_ms must be within 0..{MAX_DELAY_MS}")
        self._arm(_Rule(api_key_of(api), _count(count), "delay", delay_ms=delay_ms, when=when))

    def clear(self) -> None:
        """Disarm every rule (counts stay)."""
        with self._lock:
            self._rules.clear()

    def pending(self) -> int:
        """Requests still to be affected by armed rules."""
        with self._lock:
            return sum(r.remaining for r in self._rules)

    def count(self, api: int | str) -> int:
        """Requests of ``api`` received so far (failed, dropped and delayed ones included)."""
        key = api_key_of(api)
        with self._lock:
            return self._seen[key]

    def _arm(self, rule: _Rule) -> None:
        with self._lock:
            if len(self._rules) >= MAX_RULES:
                raise RuntimeError(f"more than {MAX_RULES} fault rules armed")
            self._rules.append(rule)

    # -- the request path (the broker's event loop) ------------------------------------

    def take(self, api_key: int, version: int, request: Any) -> FaultAction | None:
        """Count the request; the action of the first armed rule that takes it, if any."""
        with self._lock:
            self._seen[api_key] += 1
            rules = [r for r in self._rules if r.api_key == api_key]
        # ``when`` is the test's code: run it outside the lock.
        for rule in rules:
            if rule.when is not None and not rule.when(request):
                continue
            with self._lock:
                if rule.remaining <= 0:
                    continue
                rule.remaining -= 1
                if rule.remaining == 0 and rule in self._rules:
                    self._rules.remove(rule)
            return self._action(rule, api_key, version, request)
        return None

    @staticmethod
    def _action(rule: _Rule, api_key: int, version: int, request: Any) -> FaultAction:
        if rule.kind == "drop":
            return Drop()
        if rule.kind == "delay":
            return Delay(rule.delay_ms)
        if api_key == _PRODUCE and getattr(request, "acks", -1) == 0:
            return Drop()
        return Fail(error_response(api_key, request, version, rule.error_code))


def _count(count: int) -> int:
    if count < 1:
        raise ValueError("count must be at least 1")
    return count
