"""Client quotas (Kafka's ClientQuotaManager family): produce and fetch byte rates and
request-time percentage per user / client id, enforced by throttling.

- ``rate``: Kafka's sampled ``Rate`` (``quota.window.num`` samples of
  ``quota.window.size.seconds``) and its throttle-time formula;
- ``entities``: quota configs in the user / client-id entity store, Kafka's precedence;
- ``manager``: one manager per quota type: record, throttle time, shared sensors.
"""
