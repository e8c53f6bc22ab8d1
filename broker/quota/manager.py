"""Client quota managers (Kafka's ClientQuotaManager with its DefaultQuotaCallback), one per
quota type: PRODUCE (``producer_byte_rate``, request bytes), FETCH (``consumer_byte_rate``,
response bytes), REQUEST (``request_percentage``, handler time as a percentage of one second).

Which quota applies to (user, client id), most specific first, as Kafka resolves it::

    /config/users/<user>/clients/<client-id>    /config/users/<default>/clients/<client-id>
    /config/users/<user>/clients/<default>      /config/users/<default>/clients/<default>
    /config/users/<user>                        /config/users/<default>
    /config/clients/<client-id>                 /config/clients/<default>

and the clients that share one quota share one rate ("metric tags"): a user-level quota is
shared by all that user's client ids, a client-id-level one by all users of that id. The
user is the principal's name (``ANONYMOUS`` on PLAINTEXT).

``record`` adds a value and returns the throttle time (0 when within the quota); a fetch
that is throttled is answered empty and its bytes taken back (``unrecord``), as Kafka does.
Quota configs are read from the user / client-id entity store (``refresh`` after a change).
Rates idle for an hour are dropped, and at most ``MAX_SENSORS`` are kept (bounded memory).

Thread-safety: none (the broker's event loop).
"""

from __future__ import annotations

import enum
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from broker.quota.rate import SampledRate, throttle_time_ms
from broker.security.entity_store import CLIENT_ID, USER, Entity, EntityConfigStore

MAX_SENSORS: Final = 10_000
SENSOR_IDLE_EXPIRY_MS: Final = 3_600_000
NANOS_TO_PERCENTAGE: Final = 100.0 / 1e9  # Kafka's NanosToPercentagePerSecond


class QuotaType(enum.Enum):
    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_percentage"


# The quota keys AlterClientQuotas accepts (Kafka's user / client-id quota configs, less
# controller_mutation_rate, which this broker does not enforce); value kinds as Kafka's.
QUOTA_KEYS: Final = {QuotaType.PRODUCE.value: "LONG", QuotaType.FETCH.value: "LONG",
                     QuotaType.REQUEST.value: "DOUBLE"}

Tags = tuple[str, str]  # (user, client id); "" where the level does not apply


@dataclass(slots=True)
class _Sensor:
    rate: SampledRate
    last_ms: float


class ClientQuotaManager:
    def __init__(self, quota_type: QuotaType, entities: EntityConfigStore, *, samples: int,
                 window_s: int, clock_ms: Callable[[], float] = lambda: time.monotonic() * 1000) -> None:
        self.quota_type = quota_type
        self._entities = entities
        self._samples = samples
        self._window_ms = window_s * 1000
        self._clock_ms = clock_ms
        self._quotas: dict[Entity, float] = {}
        # Any quota of this type configured (read per request: an attribute, not a property).
        self.enabled = False
        self._sensors: OrderedDict[Tags, _Sensor] = OrderedDict()
        self.refresh()

    def refresh(self) -> None:
        """Re-read the quotas of this type from the entity store."""
        key = self.quota_type.value
        quotas: dict[Entity, float] = {}
        for entity, config in self._entities.all().items():
            if key in config:
                try:
                    quotas[entity] = float(config[key])
                except ValueError:
                    continue
        self._quotas = quotas
        self.enabled = bool(quotas)

    # -- resolution ------------------------------------------------------------------------

    def _has(self, user: str | None, client: str | None, *, with_user: bool = True,
             with_client: bool = True) -> bool:
        entity: list[tuple[str, str | None]] = []
        if with_user:
            entity.append((USER, user))
        if with_client:
            entity.append((CLIENT_ID, client))
        return tuple(entity) in self._quotas

    def tags(self, user: str, client_id: str) -> Tags:
        """Kafka's quotaMetricTags: which clients share this client's rate."""
        if self._has(user, client_id) or self._has(user, None):
            return user, client_id
        if self._has(user, None, with_client=False):
            return user, ""
        if self._has(None, client_id) or self._has(None, None):
            return user, client_id
        if self._has(None, None, with_client=False):
            return user, ""
        return "", client_id

    def limit(self, tags: Tags) -> float | None:
        """Kafka's quotaLimit: the bound for these tags, or None (unlimited)."""
        user, client = tags
        q = self._quotas
        candidates: list[Entity]
        if user and client:
            candidates = [((USER, user), (CLIENT_ID, client)), ((USER, user), (CLIENT_ID, None)),
                          ((USER, None), (CLIENT_ID, client)), ((USER, None), (CLIENT_ID, None))]
        elif user:
            candidates = [((USER, user),), ((USER, None),)]
        elif client:
            candidates = [((CLIENT_ID, client),), ((CLIENT_ID, None),)]
        else:
            return None
        for entity in candidates:
            if entity in q:
                return q[entity]
        return None

    # -- recording ---------------------------------------------------------------------------

    def _sensor(self, tags: Tags, now_ms: float) -> _Sensor:
        sensor = self._sensors.get(tags)
        if sensor is None:
            if len(self._sensors) >= MAX_SENSORS:
                self._expire(now_ms)
            sensor = _Sensor(SampledRate(self._samples, self._window_ms, now_ms), now_ms)
            self._sensors[tags] = sensor
        else:
            self._sensors.move_to_end(tags)
        sensor.last_ms = now_ms
        return sensor

    def _expire(self, now_ms: float) -> None:
        while self._sensors:
            tags, oldest = next(iter(self._sensors.items()))
            if now_ms - oldest.last_ms < SENSOR_IDLE_EXPIRY_MS and len(self._sensors) < MAX_SENSORS:
                return
            del self._sensors[tags]

    def record(self, user: str, client_id: str, value: float) -> int:
        """Record ``value`` for the client; the throttle time in ms (0: within the quota)."""
        if not self._quotas:
            return 0
        tags = self.tags(user, client_id)
        bound = self.limit(tags)
        if bound is None:
            return 0
        now = self._clock_ms()
        sensor = self._sensor(tags, now)
        sensor.rate.record(value, now)
        rate = sensor.rate.rate_per_s(now)
        if rate <= bound:
            return 0
        return throttle_time_ms(rate, bound, sensor.rate.window_size_ms(now))

    def unrecord(self, user: str, client_id: str, value: float) -> None:
        """Take back a recorded value (a throttled fetch is answered empty)."""
        tags = self.tags(user, client_id)
        sensor = self._sensors.get(tags)
        if sensor is not None:
            sensor.rate.record(-value, self._clock_ms())

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most one request may record without certain throttling (Kafka's
        getMaxValueInQuotaWindow): caps a fetch's size. None: unlimited."""
        if not self._quotas:
            return None
        bound = self.limit(self.tags(user, client_id))
        if bound is None:
            return None
        return bound * (self._samples - 1) * self._window_ms / 1000


@dataclass(slots=True)
class ClientQuotas:
    """The three managers, built from ``quota.window.num`` / ``quota.window.size.seconds``."""

    produce: ClientQuotaManager
    fetch: ClientQuotaManager
    request: ClientQuotaManager

    @classmethod
    def create(cls, entities: EntityConfigStore, samples: int, window_s: int) -> ClientQuotas:
        def make(t: QuotaType) -> ClientQuotaManager:
            return ClientQuotaManager(t, entities, samples=samples, window_s=window_s)

        quotas = cls(make(QuotaType.PRODUCE), make(QuotaType.FETCH), make(QuotaType.REQUEST))
        entities.subscribe(lambda _changed: quotas.refresh())  # another broker's change
        return quotas

    def refresh(self) -> None:
        for manager in (self.produce, self.fetch, self.request):
            manager.refresh()
