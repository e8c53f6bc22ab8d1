"""The pytest plugin (entry point ``pytest11``: ``minikafka``; ``-p no:minikafka`` turns it
off). Fixtures:

- ``kafka_broker``: one broker (``BrokerHandle``: ``.bootstrap``, ``.stop()``, ``.kill()``,
  ``.restart()``, ``.pause()``, ``.faults``, ...), in this process on its own event-loop
  thread, or in a subprocess; its scope is ``--minikafka-scope`` / the ini option
  ``minikafka_scope`` (function by default; module, package or session share one broker);
- ``kafka_broker_factory``: ``make(properties=None, *, topics=None, faults=False,
  subprocess=False)`` starts as many brokers as a test wants (each a single-node cluster),
  all stopped after the test.

What a broker starts with, later sources winning:

1. the ini option ``minikafka_properties`` (``key=value`` lines, Kafka's names);
2. ``@pytest.mark.minikafka(properties={...}, topics=..., faults=..., subprocess=...)`` on
   the test, its class or its module (for a shared broker: on the module, or the class for
   class scope);
3. the fixture's parameter, by indirect parametrization:
   ``@pytest.mark.parametrize("kafka_broker", [{"topics": ["orders"]}], indirect=True)``
   (a dict of the marker's keywords, or just the topics).

Topics: ``["a", "b"]``, ``{"a": 3}`` or ``{"a": {"partitions": 3, "config": {...}}}``.
Faults (``faults=True``, in-process only) are off otherwise. At teardown each broker gets
an ordered shutdown (a failure to shut down cleanly fails the test) and its directory is
removed (kept, and named in the error, when the shutdown failed).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast

import pytest

from pytest_minikafka.handle import BrokerError, BrokerHandle, base_properties
from pytest_minikafka.topics import TopicsSpec

__all__ = ["BrokerFactory", "BrokerOptions", "kafka_broker", "kafka_broker_factory"]

MARKER = "minikafka"
Scope: TypeAlias = Literal["function", "class", "module", "package", "session"]
SCOPES: tuple[Scope, ...] = ("function", "class", "module", "package", "session")
_OPTION_KEYS = {"properties", "topics", "faults", "subprocess"}

BrokerFactory = Callable[..., BrokerHandle]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("minikafka", "minikafka brokers for tests")
    group.addoption("--minikafka-scope", choices=SCOPES, default=None,
                    help="scope of the kafka_broker fixture (default: ini minikafka_scope, "
                         "else function)")
    group.addoption("--minikafka-subprocess", action="store_true", default=None,
                    help="run the fixtures' brokers in subprocesses instead of in process")
    parser.addini("minikafka_scope", "scope of the kafka_broker fixture", default="function")
    parser.addini("minikafka_subprocess", "run brokers in subprocesses", type="bool",
                  default=False)
    parser.addini("minikafka_properties", "broker properties for every broker, key=value "
                  "lines with Kafka's names", type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(properties=None, topics=None, faults=False, subprocess=False): "
        "how the kafka_broker fixture starts its broker (Kafka's property names; topics to "
        "create; fault hooks on; a subprocess instead of this process)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A shared ``kafka_broker`` starts once, from the markers of the node it is shared by:
    a marker below that node (on a test of a module-scoped broker) would be ignored, so it
    is refused instead."""
    if "kafka_broker" not in getattr(item, "fixturenames", ()):
        return
    scope = _scope("kafka_broker", item.config)
    if scope == "function":
        return
    # The node types below the one a broker of this scope is shared by.
    below = {"class": (pytest.Function,), "module": (pytest.Function, pytest.Class)}.get(
        scope, (pytest.Function, pytest.Class, pytest.Module))
    for node, _marker in item.iter_markers_with_node(MARKER):
        if isinstance(node, below):
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.{MARKER} on {node.name} does not apply to the "
                f"kafka_broker fixture shared with scope {scope!r}: put it on the "
                f"{scope if scope in ('class', 'module') else 'conftest or ini options'}, or "
                "use kafka_broker_factory")


def _scope(fixture_name: str, config: pytest.Config) -> Scope:
    scope = config.getoption("minikafka_scope") or config.getini("minikafka_scope")
    if scope not in SCOPES:
        raise pytest.UsageError(f"minikafka_scope must be one of {', '.join(SCOPES)}, "
                                f"not {scope!r}")
    return cast(Scope, scope)


@dataclass
class BrokerOptions:
    properties: dict[str, Any] = field(default_factory=dict)
    topics: TopicsSpec = None
    faults: bool = False
    subprocess: bool = False

    def update(self, values: Mapping[str, Any], where: str) -> None:
        unknown = set(values) - _OPTION_KEYS
        if unknown:
            raise pytest.UsageError(f"{where}: unknown {sorted(unknown)}; expected "
                                    f"{sorted(_OPTION_KEYS)}")
        self.properties.update(values.get("properties") or {})
        for key in ("topics", "faults", "subprocess"):
            if key in values:
                setattr(self, key, values[key])


def _ini_properties(config: pytest.Config) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for line in config.getini("minikafka_properties"):
        key, sep, value = str(line).partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"minikafka_properties: expected key=value, got {line!r}")
        props[key.strip()] = value.strip()
    return props


def options_for(request: pytest.FixtureRequest) -> BrokerOptions:
    config = request.config
    options = BrokerOptions(properties=_ini_properties(config),
                            subprocess=bool(config.getoption("minikafka_subprocess")
                                            or config.getini("minikafka_subprocess")))
    # Outermost marker first (module, class, test), so the closest one wins.
    for marker in reversed(list(request.node.iter_markers(MARKER))):
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keywords only")
        options.update(marker.kwargs, f"@pytest.mark.{MARKER}")
    param = getattr(request, "param", None)
    if isinstance(param, Mapping):
        options.update(param, f"{request.fixturename} parameter")
    elif param is not None:
        options.topics = param  # a list of topic names (or a topic mapping)
    return options


def start_broker(options: BrokerOptions, directory: Path, name: str) -> BrokerHandle:
    """Start one broker as ``options`` say, with its log dir under ``directory``, and create
    its topics."""
    properties = base_properties(directory / "data", options.properties)
    broker: BrokerHandle
    if options.subprocess:
        if options.faults:
            raise pytest.UsageError("faults=True needs an in-process broker (request faults are "
                                    "never reachable from outside the broker's process)")
        from pytest_minikafka.subprocess_broker import SubprocessBroker

        broker = SubprocessBroker(properties, name=name)
    else:
        from pytest_minikafka.inprocess import InProcessBroker

        broker = InProcessBroker(properties, faults=bool(options.faults), name=name)
    broker.start()
    try:
        broker.create_topics(options.topics)
    except BaseException:
        _finish(broker, directory)
        raise
    return broker


def _finish(broker: BrokerHandle, directory: Path) -> None:
    """Ordered shutdown, then remove the broker's directory (kept when the shutdown failed)."""
    try:
        broker.stop()
    except BrokerError as exc:
        raise BrokerError(f"{exc}\n(its files are kept in {directory})") from None
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope=_scope)
def kafka_broker(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerHandle]:
    """One broker on 127.0.0.1 (ephemeral port, temporary log dir): ``.bootstrap``."""
    directory = tmp_path_factory.mktemp("kafka_broker")
    broker = start_broker(options_for(request), directory, "kafka_broker")
    yield broker
    _finish(broker, directory)


@pytest.fixture
def kafka_broker_factory(request: pytest.FixtureRequest,
                         tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    """``make(properties=None, *, topics=None, faults=False, subprocess=False)``: start a
    broker (defaults from the ini options and the test's ``minikafka`` marker)."""
    started: list[tuple[BrokerHandle, Path]] = []
    defaults = options_for(request)

    def make(properties: Mapping[str, Any] | None = None, *, topics: TopicsSpec = None,
             faults: bool | None = None, subprocess: bool | None = None) -> BrokerHandle:
        options = BrokerOptions(
            properties={**defaults.properties, **(properties or {})},
            topics=topics, faults=defaults.faults if faults is None else faults,
            subprocess=defaults.subprocess if subprocess is None else subprocess)
        name = f"broker{len(started)}"
        directory = tmp_path_factory.mktemp(name)
        broker = start_broker(options, directory, name)
        started.append((broker, directory))
        return broker

    yield make
    errors: list[str] = []
    for broker, directory in reversed(started):
        try:
            _finish(broker, directory)
        except BrokerError as exc:
            errors.append(str(exc))
    if errors:
        raise BrokerError("\n".join(errors))
