"""Fixtures that run real brokers (``minikafka broker`` subprocesses) for integration tests.

- ``broker``: a fresh broker for one test (``.bootstrap``, ``.log_dir``, ``.restart()``,
  ``.kill9_and_restart()``, ``.stop()``, ``.pid``, ``.stderr_text()``);
- ``module_broker``: one broker shared by a test module (faster; tests must not depend on
  each other's state); ``module_broker_factory(name, props)`` starts such brokers with
  properties set (Kafka's names);
- ``broker_factory(overrides=None, **props)``: start brokers with properties set; keyword
  names use ``_`` for ``.`` (``auto_create_topics_enable="false"``), or pass a dict with
  Kafka's names. ``env=`` sets environment variables for the process.

Every broker started is stopped with SIGTERM at teardown; when the test failed, its
stderr (the broker's log) is printed so the failure can be read. After the teardown,
tests/conftest.py checks every broker's exit code and log (``@pytest.mark.broker_errors``
declares the errors a test provokes on purpose).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.replica_manager import ReplicaManager
from tests import outcome
from tests.integration.broker_process import BrokerProcess

BrokerFactory = Callable[..., BrokerProcess]
ModuleBrokerFactory = Callable[..., BrokerProcess]


def _props(overrides: dict[str, Any] | None, kwargs: dict[str, Any]) -> dict[str, str]:
    props = {k: str(v) for k, v in (overrides or {}).items()}
    props.update({k.replace("_", "."): str(v) for k, v in kwargs.items()})
    return props


def _teardown(brokers: list[BrokerProcess], failed: bool) -> None:
    for proc in brokers:
        try:
            proc.stop()
        finally:
            if failed:
                print(f"\n----- {proc.name} stderr ({proc.stderr_path}) -----\n{proc.stderr_text()}")


@pytest.fixture
def broker_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, Any] | None = None, *, env: dict[str, str] | None = None,
             **props: Any) -> BrokerProcess:
        proc = BrokerProcess(tmp_path, _props(overrides, props), env=env,
                             name=f"broker{len(started)}")
        started.append(proc)
        return proc.start()

    yield make
    _teardown(started, outcome.failed(request.node))


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker_factory(tmp_path_factory: pytest.TempPathFactory,
                          request: pytest.FixtureRequest) -> Iterator[ModuleBrokerFactory]:
    """``make(name, props)``: a started broker shared by the test module (its data under a
    directory of its own, named ``name``), stopped after the module; its log is printed
    when a test of the module failed."""
    started: list[BrokerProcess] = []

    def make(name: str, props: dict[str, str] | None = None) -> BrokerProcess:
        proc = BrokerProcess(tmp_path_factory.mktemp(name), props, name=name)
        started.append(proc)
        return proc.start()

    yield make
    failed = any(outcome.failed(item) for item in request.session.items
                 if getattr(item, "module", None) is request.module)
    _teardown(started, failed)


@pytest.fixture(scope="module")
def module_broker(module_broker_factory: ModuleBrokerFactory) -> BrokerProcess:
    return module_broker_factory("module-broker")


@pytest.fixture
def sendfile_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """What each os.sendfile call of the test sent, in bytes (the real call runs)."""
    calls: list[int] = []
    real = os.sendfile

    def counting(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        n = real(out_fd, in_fd, offset, count)
        calls.append(n)
        return n

    monkeypatch.setattr(os, "sendfile", counting)
    return calls


@pytest.fixture
def group_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many requests each ``append_group`` call of an in-process broker held (the real
    call runs)."""
    sizes: list[int] = []
    real = ReplicaManager.append_group

    def recording(self: ReplicaManager, tp: object, records: list[object],
                  version: int) -> object:
        sizes.append(len(records))
        return real(self, tp, records, version)  # type: ignore[arg-type]

    monkeypatch.setattr(ReplicaManager, "append_group", recording)
    return sizes
