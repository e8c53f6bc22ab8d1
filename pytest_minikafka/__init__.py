"""minikafka for tests: Kafka brokers started inside the test process (or in a subprocess),
with fault hooks, as a pytest plugin (fixtures ``kafka_broker``, ``kafka_broker_factory``;
see the user guide, docs/testing.md).

Usable without pytest too::

    from pytest_minikafka import InProcessBroker, base_properties
    broker = InProcessBroker(base_properties(tmp_dir, {"num.partitions": 3})).start()
    ...
    broker.stop()

Importing this package imports no broker code: that happens on the first ``start()``.
"""

from pytest_minikafka.faults import Faults
from pytest_minikafka.handle import BrokerError, BrokerHandle, base_properties
from pytest_minikafka.inprocess import InProcessBroker
from pytest_minikafka.topics import TopicSpec, parse_topics

__all__ = ["BrokerError", "BrokerHandle", "Faults", "InProcessBroker", "TopicSpec",
           "base_properties", "parse_topics"]
