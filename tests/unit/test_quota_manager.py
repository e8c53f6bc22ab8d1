"""Client quotas: Kafka's ClientQuotaManagerTest cases with the same numbers (the spike
throttled 2100 ms, the 8-level precedence and sharing of quotas), the sampled rate's window
arithmetic, and the admin rules of Describe/AlterClientQuotas."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.quota import admin
from broker.quota.manager import ClientQuotaManager, QuotaType
from broker.quota.rate import SampledRate, throttle_time_ms
from broker.quota.throttling import client_throttles
from broker.security.entity_store import CLIENT_ID, USER, Entity, LocalEntityConfigStore

SAMPLES, WINDOW_S = 11, 1  # Kafka's defaults: quota.window.num, quota.window.size.seconds


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


def entity(user: str | bool | None = False, client: str | bool | None = False) -> Entity:
    """user / client: a name, None for <default>, False for absent."""
    parts: list[tuple[str, str | None]] = []
    if user is not False:
        parts.append((USER, user))  # type: ignore[arg-type]
    if client is not False:
        parts.append((CLIENT_ID, client))  # type: ignore[arg-type]
    return tuple(parts)


@pytest.fixture
def store(tmp_path: Path) -> LocalEntityConfigStore:
    return LocalEntityConfigStore.load(tmp_path)


def manager(store: LocalEntityConfigStore, clock: Clock, quotas: dict[Entity, float | None]) -> ClientQuotaManager:
    store.alter_now({e: {"producer_byte_rate": None if q is None else str(int(q))} for e, q in quotas.items()})
    return ClientQuotaManager(QuotaType.PRODUCE, store, samples=SAMPLES, window_s=WINDOW_S, clock_ms=clock)


def test_quota_violation_spike(store: LocalEntityConfigStore) -> None:
    clock = Clock()
    m = manager(store, clock, {entity(None, None): 500})
    for _ in range(10):
        assert m.record("ANONYMOUS", "unknown", 400) == 0
        clock.ms += 1000
    clock.ms += 500
    # 400*10 + 2000 + 300 = 6300 bytes / 10.5 s = 600 bytes/s; (600-500)/500 * 10.5 s = 2100 ms
    assert m.record("ANONYMOUS", "unknown", 2300) == 2100
    clock.ms += 2100
    for _ in range(10):
        m.record("ANONYMOUS", "unknown", 400)
        clock.ms += 1000
    assert m.record("ANONYMOUS", "unknown", 0) == 0  # the burst has rolled out of the window


def check(m: ClientQuotaManager, user: str, client: str, bound: float | None, value: int,
          throttled: bool) -> None:
    assert m.limit(m.tags(user, client)) == bound
    window = m.max_value_in_window(user, client)
    assert window == (None if bound is None else bound * (SAMPLES - 1) * WINDOW_S)
    got = m.record(user, client, value * SAMPLES)
    assert (got > 0) == throttled, (user, client, got)


def test_quota_config_precedence(store: LocalEntityConfigStore) -> None:
    clock = Clock()
    m = manager(store, clock, {
        entity(None): 1000, entity(client=None): 2000, entity(None, None): 3000,
        entity("userA"): 4000, entity("userA", "client1"): 5000, entity("userB"): 6000,
        entity("userB", "client1"): 7000, entity("userB", None): 8000, entity("userC"): 10000,
        entity(client="client1"): 9000})

    def set_quota(e: Entity, q: float | None) -> None:
        store.alter_now({e: {"producer_byte_rate": None if q is None else str(int(q))}})
        m.refresh()

    check(m, "userA", "client1", 5000, 4500, False)  # <user, client> before <user>
    check(m, "userA", "client2", 4000, 4500, True)  # <user> before <client> and defaults
    check(m, "userA", "client3", 4000, 0, True)  # <user> is shared by the user's clients
    check(m, "userA", "client1", 5000, 0, False)  # <user, client> is exclusive
    check(m, "userB", "client1", 7000, 8000, True)
    check(m, "userB", "client2", 8000, 7000, False)  # <user, default client> per client
    check(m, "userB", "client3", 8000, 7000, False)
    check(m, "userD", "client1", 3000, 3500, True)  # <default user, default client>
    check(m, "userD", "client2", 3000, 2500, False)
    check(m, "userE", "client1", 3000, 2500, False)
    set_quota(entity(None, None), None)
    check(m, "userD", "client1", 1000, 0, False)  # the tags changed: a new rate
    check(m, "userE", "client4", 1000, 1500, True)
    check(m, "userF", "client4", 1000, 800, False)  # <default user> shared by the user's clients
    check(m, "userF", "client5", 1000, 800, True)
    set_quota(entity(None), None)
    check(m, "userF", "client4", 2000, 0, False)  # <default client> shared across users
    check(m, "userF", "client5", 2000, 0, False)
    check(m, "userF", "client5", 2000, 2500, True)
    check(m, "userG", "client5", 2000, 0, True)
    set_quota(entity("userA"), 8000)
    set_quota(entity("userA", "client1"), 10000)
    check(m, "userA", "client2", 8000, 0, False)
    check(m, "userA", "client2", 8000, 4500, True)  # the sum of new and earlier values
    check(m, "userA", "client1", 10000, 0, False)
    check(m, "userA", "client1", 10000, 6000, True)
    set_quota(entity("userA", "client1"), None)
    check(m, "userA", "client6", 8000, 0, True)  # the shared user quota
    set_quota(entity("userA", "client6"), 11000)
    check(m, "userA", "client6", 11000, 8500, False)
    set_quota(entity("userA", None), 12000)
    set_quota(entity("userA", "client6"), None)
    check(m, "userA", "client6", 12000, 4000, True)


def test_no_quota_no_throttle_and_unrecord(store: LocalEntityConfigStore) -> None:
    clock = Clock()
    m = manager(store, clock, {})
    assert not m.enabled and m.record("u", "c", 10**9) == 0 and m.max_value_in_window("u", "c") is None
    m = manager(store, clock, {entity("u"): 100})
    assert m.record("u", "c", 100 * SAMPLES) > 0
    m.unrecord("u", "c", 100 * SAMPLES)
    assert m.record("u", "c", 0) == 0


def test_sampled_rate_window() -> None:
    rate = SampledRate(11, 1000, 0.0)
    assert rate.window_size_ms(0.0) == 10_000  # at least samples-1 whole windows
    rate.record(1000.0, 0.0)
    assert rate.rate_per_s(0.0) == 100.0
    assert rate.window_size_ms(25_000.0) == 10_000  # everything expired
    assert rate.rate_per_s(25_000.0) == 0.0
    assert throttle_time_ms(600, 500, 10_500) == 2100 and throttle_time_ms(400, 500, 10_000) == 0


def test_client_throttling_versions() -> None:
    assert client_throttles(0, 6) and not client_throttles(0, 5)  # Produce v6+
    assert client_throttles(1, 8) and not client_throttles(1, 7)  # Fetch v8+
    assert not client_throttles(48, 1)  # DescribeClientQuotas: always held back


# -- admin rules -----------------------------------------------------------------------------

def test_describe_filters(store: LocalEntityConfigStore) -> None:
    store.alter_now({entity("alice"): {"producer_byte_rate": "100", "SCRAM-SHA-256": "secret"},
                 entity("alice", "c1"): {"consumer_byte_rate": "200"},
                 entity(None): {"request_percentage": "50.0"},
                 entity(client="c1"): {"producer_byte_rate": "300"},
                 entity("bob"): {"SCRAM-SHA-256": "only-a-credential"}})

    def names(components: list[admin.Component], strict: bool = False) -> list[Entity]:
        return [e for e, _ in admin.describe(store, components, strict)]

    everything = names([])
    assert set(everything) == {entity("alice"), entity("alice", "c1"), entity(None), entity(client="c1")}
    assert names([admin.Component(USER, admin.EXACT, "alice")]) == sorted(
        [entity("alice"), entity("alice", "c1")], key=repr)
    assert names([admin.Component(USER, admin.EXACT, "alice")], strict=True) == [entity("alice")]
    assert names([admin.Component(USER, admin.DEFAULT, None)]) == [entity(None)]
    assert names([admin.Component(CLIENT_ID, admin.ANY, None)], strict=True) == [entity(client="c1")]
    values = dict(admin.describe(store, [admin.Component(USER, admin.EXACT, "alice")], True))
    assert values[entity("alice")] == {"producer_byte_rate": 100.0}  # never the credential
    with pytest.raises(admin.QuotaRequestError, match="Duplicate user filter component entity type"):
        names([admin.Component(USER, admin.ANY, None), admin.Component(USER, admin.ANY, None)])
    with pytest.raises(admin.QuotaRequestError, match="Custom entity type 'ip' not supported"):
        names([admin.Component("ip", admin.ANY, None)])


@pytest.mark.parametrize(("pairs", "ops", "message"), [
    ([], [("producer_byte_rate", 1.0, False)], "Invalid empty client quota entity"),
    ([(USER, "")], [("producer_byte_rate", 1.0, False)], "Empty user not supported"),
    ([("ip", "1.2.3.4")], [("connection_creation_rate", 1.0, False)], "IP quotas"),
    ([(USER, "a"), (USER, "b")], [("producer_byte_rate", 1.0, False)], "Duplicate user"),
    ([(USER, "a")], [("SCRAM-SHA-256", 1.0, False)], "Invalid configuration key SCRAM-SHA-256"),
    ([(USER, "a")], [("controller_mutation_rate", 1.0, False)], "Invalid configuration key"),
    ([(USER, "a")], [("producer_byte_rate", 1.5, False)], "must be a LONG value"),
    ([(USER, "a")], [("request_percentage", 0.0, False)], "must be positive"),
])
def test_alter_refusals(pairs: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]],
                        message: str) -> None:
    with pytest.raises(admin.QuotaRequestError, match=message):
        admin.entity_of(pairs)
        admin.plan_ops(ops)


def test_alter_plans() -> None:
    assert admin.entity_of([(CLIENT_ID, "c"), (USER, None)]) == ((USER, None), (CLIENT_ID, "c"))
    assert admin.plan_ops([("producer_byte_rate", 1024.0, False), ("request_percentage", 12.5, False),
                           ("consumer_byte_rate", 0.0, True)]) == {
        "producer_byte_rate": "1024", "request_percentage": "12.5", "consumer_byte_rate": None}
