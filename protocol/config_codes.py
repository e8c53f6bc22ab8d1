"""The codes of Kafka's config APIs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs),
by the names Kafka gives them: what the broker answers and the client sends, one table.

- ``ConfigResourceType``: ``resource_type`` of a config resource (Kafka's
  ``ConfigResource.Type``).
- ``ConfigSource``: DescribeConfigs v1+ ``config_source`` of a value and of its synonyms
  (Kafka's ``DescribeConfigsResponse.ConfigSource``).
- ``AlterConfigOpType``: IncrementalAlterConfigs ``config_operation`` (Kafka's
  ``AlterConfigOp.OpType``).
"""

from __future__ import annotations

import enum


class ConfigResourceType(enum.IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


class AlterConfigOpType(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3
