"""The pytest plugin (entry point ``pytest11``: ``minikafka``; ``-p no:minikafka`` turns it
off). Fixtures:

- ``kafka_broker``: one broker (``BrokerHandle``: ``.bootstrap``, ``.stop()``, ``.kill()``,
  ``.restart()``, ``.pause()``, ``.faults``, ...), in this process on its own event-loop
  thread, or in a subprocess; its scope is ``--minikafka-scope`` / the ini option
  ``minikafka_scope`` (function by default; module, package or session share one broker);
- ``kafka_broker_factory``: ``make(properties=None, *, topics=None, faults=False,
  subprocess=False)`` starts as many brokers as a test wants (each a single-node cluster),
  all stopped after the test;
- ``kafka_cluster``: a cluster of brokers (``brokers=3`` by default) on a real ZooKeeper
  (``KafkaCluster``: ``.bootstrap``, ``.brokers``, ``.broker(id)``, ``.leader(topic, p)``,
  ``.controller()``, ``.move_leadership(topic, p)``, ...), scoped as ``kafka_broker``;
  ``kafka_cluster_factory``: ``make(brokers=3, properties=None, *, topics=None, ...)``;
- ``minikafka_zookeeper`` (session): the ZooKeeper the clusters share, each in a chroot of
  its own: one started from the Kafka jars (Java needed), or the one named by
  ``--minikafka-zookeeper=HOST:PORT`` / the ini option ``minikafka_zookeeper``.

What a broker starts with, later sources winning:

1. the ini option ``minikafka_properties`` (``key=value`` lines, Kafka's names);
2. ``@pytest.mark.minikafka(properties={...}, topics=..., faults=..., subprocess=...,
   brokers=...)`` on
   the test, its class or its module (for a shared broker: on the module, or the class for
   class scope);
3. the fixture's parameter, by indirect parametrization:
   ``@pytest.mark.parametrize("kafka_broker", [{"topics": ["orders"]}], indirect=True)``
   (a dict of the marker's keywords, or just the topics).

Topics: ``["a", "b"]``, ``{"a": 3}`` or ``{"a": {"partitions": 3, "config": {...}}}``.
Faults (``faults=True``, in-process only) are off otherwise. At teardown each broker gets
an ordered shutdown (a failure to shut down cleanly fails the test) and its directory is
removed (kept, and named in the error, when the shutdown failed); a cluster's brokers are
killed together (pytest_minikafka.cluster says why), its chroot and files removed.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast

import pytest

from pytest_minikafka.cluster import KafkaCluster, ZooKeeperServer, make_chroot, remove_chroot
from pytest_minikafka.handle import BrokerError, BrokerHandle, base_properties
from pytest_minikafka.topics import TopicsSpec

__all__ = ["BrokerFactory", "BrokerOptions", "ClusterFactory", "kafka_broker",
           "kafka_broker_factory", "kafka_cluster", "kafka_cluster_factory",
           "minikafka_zookeeper"]

MARKER = "minikafka"
Scope: TypeAlias = Literal["function", "class", "module", "package", "session"]
SCOPES: tuple[Scope, ...] = ("function", "class", "module", "package", "session")
_OPTION_KEYS = {"properties", "topics", "faults", "subprocess", "brokers"}
SHARED_FIXTURES = ("kafka_broker", "kafka_cluster")
CLUSTER_SIZE = 3

BrokerFactory = Callable[..., BrokerHandle]
ClusterFactory = Callable[..., KafkaCluster]


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
    group.addoption("--minikafka-zookeeper", default=None, metavar="HOST:PORT",
                    help="a running ZooKeeper for the kafka_cluster fixtures (default: ini "
                         "minikafka_zookeeper, else one is started from the Kafka jars)")
    parser.addini("minikafka_zookeeper", "a running ZooKeeper (host:port[,host:port]) for "
                  "kafka_cluster", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(properties=None, topics=None, faults=False, subprocess=False, "
        "brokers=3): how the kafka_broker and kafka_cluster fixtures start their brokers "
        "(Kafka's property names; topics to create; fault hooks on; a subprocess instead of "
        "this process; the size of a kafka_cluster)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A shared ``kafka_broker`` (or ``kafka_cluster``) starts once, from the markers of the
    node it is shared by: a marker below that node (on a test of a module-scoped broker)
    would be ignored, so it is refused instead."""
    used = [f for f in SHARED_FIXTURES if f in getattr(item, "fixturenames", ())]
    if not used:
        return
    fixture = used[0]
    scope = _scope(fixture, item.config)
    if scope == "function":
        return
    # The node types below the one a broker of this scope is shared by.
    below = {"class": (pytest.Function,), "module": (pytest.Function, pytest.Class)}.get(
        scope, (pytest.Function, pytest.Class, pytest.Module))
    for node, _marker in item.iter_markers_with_node(MARKER):
        if isinstance(node, below):
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.{MARKER} on {node.name} does not apply to the "
                f"{fixture} fixture shared with scope {scope!r}: put it on the "
                f"{scope if scope in ('class', 'module') else 'conftest or ini options'}, or "
                f"use {fixture}_factory")


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
    brokers: int = CLUSTER_SIZE  # kafka_cluster only

    def update(self, values: Mapping[str, Any], where: str) -> None:
        unknown = set(values) - _OPTION_KEYS
        if unknown:
            raise pytest.UsageError(f"{where}: unknown {sorted(unknown)}; expected "
                                    f"{sorted(_OPTION_KEYS)}")
        self.properties.update(values.get("properties") or {})
        for key in ("topics", "faults", "subprocess", "brokers"):
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


def broker_builder(options: BrokerOptions) -> Callable[[dict[str, str], str], BrokerHandle]:
    """``new(properties, name)``: a broker handle (not started) of the kind ``options`` ask
    for."""
    if options.subprocess and options.faults:
        raise pytest.UsageError("faults=True needs an in-process broker (request faults are "
                                "never reachable from outside the broker's process)")

    def new(properties: dict[str, str], name: str) -> BrokerHandle:
        if options.subprocess:
            from pytest_minikafka.subprocess_broker import SubprocessBroker

            return SubprocessBroker(properties, name=name)
        from pytest_minikafka.inprocess import InProcessBroker

        return InProcessBroker(properties, faults=bool(options.faults), name=name)

    return new


def start_broker(options: BrokerOptions, directory: Path, name: str) -> BrokerHandle:
    """Start one broker as ``options`` say, with its log dir under ``directory``, and create
    its topics."""
    properties = base_properties(directory / "data", options.properties)
    broker = broker_builder(options)(properties, name)
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


# -- clusters ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def minikafka_zookeeper(request: pytest.FixtureRequest,
                        tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """The ZooKeeper every ``kafka_cluster`` of the session uses (each in its own chroot)."""
    config = request.config
    named = config.getoption("minikafka_zookeeper") or config.getini("minikafka_zookeeper")
    if named:
        server = ZooKeeperServer(None, connect_string=str(named).strip().rstrip("/"))
    else:
        server = ZooKeeperServer(tmp_path_factory.mktemp("minikafka-zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def start_cluster(options: BrokerOptions, zookeeper: ZooKeeperServer, directory: Path) -> KafkaCluster:
    """Start a cluster as ``options`` say (``brokers``, properties, topics, ...) in a new
    chroot of ``zookeeper``."""
    if int(options.brokers) < 1:
        raise pytest.UsageError(f"brokers={options.brokers}: a cluster needs at least one")
    chroot = make_chroot(zookeeper.connect_string)
    cluster = KafkaCluster(zookeeper.connect_string + chroot, int(options.brokers), directory,
                           options.properties, broker_builder(options))
    try:
        cluster.start()
        cluster.create_topics(options.topics)
    except BaseException:
        _finish_cluster(cluster, zookeeper, chroot)
        raise
    return cluster


def _finish_cluster(cluster: KafkaCluster, zookeeper: ZooKeeperServer, chroot: str) -> None:
    """Kill every broker at once, then remove the chroot and the brokers' files."""
    cluster.kill()
    remove_chroot(zookeeper.connect_string, chroot)
    shutil.rmtree(cluster.directory, ignore_errors=True)


def _chroot_of(cluster: KafkaCluster) -> str:
    return "/" + cluster.zookeeper_connect.partition("/")[2]


@pytest.fixture(scope=_scope)
def kafka_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                  minikafka_zookeeper: ZooKeeperServer) -> Iterator[KafkaCluster]:
    """A cluster of brokers (ids 1..N, ``brokers=3`` by default) on ZooKeeper:
    ``.bootstrap``, ``.brokers``, ``.leader(topic, partition)``, ..."""
    cluster = start_cluster(options_for(request), minikafka_zookeeper,
                            tmp_path_factory.mktemp("kafka_cluster"))
    yield cluster
    _finish_cluster(cluster, minikafka_zookeeper, _chroot_of(cluster))


@pytest.fixture
def kafka_cluster_factory(request: pytest.FixtureRequest,
                          tmp_path_factory: pytest.TempPathFactory,
                          minikafka_zookeeper: ZooKeeperServer) -> Iterator[ClusterFactory]:
    """``make(brokers=3, properties=None, *, topics=None, faults=False, subprocess=False)``:
    start a cluster (defaults from the ini options and the test's ``minikafka`` marker)."""
    started: list[KafkaCluster] = []
    defaults = options_for(request)

    def make(brokers: int | None = None, properties: Mapping[str, Any] | None = None, *,
             topics: TopicsSpec = None, faults: bool | None = None,
             subprocess: bool | None = None) -> KafkaCluster:
        options = BrokerOptions(
            properties={**defaults.properties, **(properties or {})}, topics=topics,
            faults=defaults.faults if faults is None else faults,
            subprocess=defaults.subprocess if subprocess is None else subprocess,
            brokers=defaults.brokers if brokers is None else brokers)
        cluster = start_cluster(options, minikafka_zookeeper,
                                tmp_path_factory.mktemp(f"cluster{len(started)}"))
        started.append(cluster)
        return cluster

    yield make
    errors: list[str] = []
    for cluster in reversed(started):
        try:
            _finish_cluster(cluster, minikafka_zookeeper, _chroot_of(cluster))
        except BrokerError as exc:
            errors.append(str(exc))
    if errors:
        raise BrokerError("\n".join(errors))
