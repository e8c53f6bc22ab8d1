"""The answers of Produce (broker/handlers/produce.py): the general response of a request's
appends, and a fast-path request waiting for the end of the turn's appends.

Not compiled with the request path (scripts/build-request-path): ``PendingProduce`` is a
``Parked`` (a Python class with slots), which a class mypyc compiles cannot derive from;
being one, a waiting request costs one object, not two.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.handlers.base import CloseConnection, Parked, Respond
from broker.partition import PlainResults
from protocol.errors import ErrorCode
from protocol.messages.produce import ProduceResponse
from protocol.produce_fast import (
    ResponseTemplate,
    encode_single_response,
    single_response_template,
)
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.partition import AppendResult, GroupResults
    from broker.produce_appends import PendingAppend
    from broker.security.principal import KafkaPrincipal
    from broker.services import Broker
    from protocol.frames import RequestHeader

log = logging.getLogger(__name__)

_Resp = ProduceResponse
_new_tuple = tuple.__new__  # a NamedTuple's own __new__ is Python code; this is C
# Enum members read on the per-request path, looked up once: on Python 3.11 a class
# attribute of an Enum costs a metaclass __getattr__ hook call (~10x a global read).
_NO_ERROR = ErrorCode.NO_ERROR


class PendingProduce(Parked):
    """A fast-path produce waiting for its append at the end of the turn
    (broker.produce_appends.PendingAppend); what the fast path returned (the request
    channel and the connection fill in how it is answered), answered from there."""

    __slots__ = ("_broker", "_header", "_index", "_principal", "_size", "_topic", "records")

    def __init__(self, records: memoryview | bytes | None, broker: Broker,
                 header: RequestHeader, topic: str, index: int, principal: KafkaPrincipal,
                 size: int) -> None:
        self.answer_via = None  # Parked's __init__, inline (a call less)
        self.send_frame = None
        self.records = records
        self._broker = broker
        self._header = header
        self._topic = topic
        self._index = index
        self._principal = principal
        self._size = size

    def appended(self, r: AppendResult) -> None:
        header = self._header
        # producer_byte_rate: the request's bytes count against the client's quota.
        quota = self._broker.quotas.produce
        throttle_ms = (quota.record(self._principal.name, header.client_id or "", self._size)
                       if quota.enabled else 0)  # (record() answers 0 at once when not enabled)
        if r.error is _NO_ERROR and not r.record_errors and not throttle_ms:
            response = encode_single_response(header.correlation_id, header.api_version,
                                              self._topic, self._index, r.error, r.base_offset,
                                              r.log_append_time_ms, r.log_start_offset, 0)
            send = self.send_frame
            if response is not None and send is not None:
                send(response)
                return
            if response is not None:
                answer: Respond | bytes = response
            else:
                answer = respond({_new_tuple(TopicPartition, (self._topic, self._index)): r},
                                 [], throttle_ms)
        else:
            answer = respond({_new_tuple(TopicPartition, (self._topic, self._index)): r}, [],
                             throttle_ms)
        self.deliver(answer)  # (answer_via: set by the request channel when it was returned)

    def failed(self) -> None:
        if self.answer_via is not None:
            self.deliver(CloseConnection("handler error"))

    def answer_group(self, group: list[PendingAppend], results: GroupResults) -> None:
        """``appended`` of each request of a group append (broker.produce_appends), this
        one first: a plain success (no quota, no error, no record errors) with the
        response frame of the group's template (``single_response_template``: the same
        bytes as ``encode_single_response``, its correlation id and base offset set per
        answer), made once for the group; anything else by ``appended``. Never raises:
        an answer that fails is logged and its request ``failed``."""
        # producer_byte_rate: with a quota each answer is appended's (its throttle time);
        # a group of one too (a template costs more than one encoding).
        plain = len(group) > 1 and not self._broker.quotas.produce.enabled
        if plain and type(results) is PlainResults and self._answer_plain_group(group, results):
            return
        template: ResponseTemplate | None = None
        made = False  # template made (None: encode_single_response does not encode these)
        append_time = start_offset = 0  # the template's (set with it)
        for pending, r in zip(group, results, strict=True):
            try:
                if (plain and type(pending) is PendingProduce and r.error is _NO_ERROR
                        and not r.record_errors and pending.send_frame is not None):
                    if (not made or r.log_append_time_ms != append_time
                            or r.log_start_offset != start_offset):
                        template = single_response_template(
                            self._header.api_version, self._topic, self._index, _NO_ERROR,
                            r.log_append_time_ms, r.log_start_offset, 0)
                        append_time, start_offset = r.log_append_time_ms, r.log_start_offset
                        made = True
                    if template is not None:
                        layout, head, middle, tail = template
                        pending.send_frame(layout.pack(head, pending._header.correlation_id,
                                                       middle, r.base_offset, tail))
                        continue
                pending.appended(r)
            except Exception:
                log.exception("Answering a produce request to %s-%d failed; closing its "
                              "connection", self._topic, self._index)
                pending.failed()

    def _answer_plain_group(self, group: list[PendingAppend], results: PlainResults) -> bool:
        """``answer_group`` of a plain group append's results (every one a success at its
        first offset, no LogAppendTime, the same log start offset: one template for all),
        read without making their ``AppendResult``s; False (nothing answered) where the
        version has no template."""
        template = single_response_template(self._header.api_version, self._topic,
                                            self._index, _NO_ERROR, -1,
                                            results.log_start_offset, 0)
        if template is None:
            return False
        layout, head, middle, tail = template
        for k, (pending, first) in enumerate(zip(group, results.first_offsets, strict=True)):
            try:
                if type(pending) is PendingProduce and pending.send_frame is not None:
                    pending.send_frame(layout.pack(head, pending._header.correlation_id,
                                                   middle, first, tail))
                else:
                    pending.appended(results[k])
            except Exception:
                log.exception("Answering a produce request to %s-%d failed; closing its "
                              "connection", self._topic, self._index)
                pending.failed()
        return True


def respond(results: dict[TopicPartition, AppendResult], denied: list[TopicPartition],
            throttle_ms: int) -> Respond:
    """The Produce response of ``results`` (and of ``denied``: refused by the authorizer)."""
    by_topic: dict[str, list[ProduceResponse.PartitionProduceResponse]] = {}
    for name, index in denied:  # Kafka: unauthorized topics are not appended to
        by_topic.setdefault(name, []).append(_Resp.PartitionProduceResponse(
            index=index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, base_offset=-1,
            log_append_time_ms=-1, log_start_offset=-1))
    for (name, index), r in results.items():
        by_topic.setdefault(name, []).append(_Resp.PartitionProduceResponse(
            index=index,
            error_code=r.error,
            base_offset=r.base_offset,
            log_append_time_ms=r.log_append_time_ms,
            log_start_offset=r.log_start_offset,
            record_errors=([_Resp.BatchIndexAndErrorMessage(i, m) for i, m in r.record_errors]
                           if r.record_errors else []),
            error_message=r.error_message if r.error is not ErrorCode.NO_ERROR else None,
        ))
    return Respond(ProduceResponse(
        responses=[_Resp.TopicProduceResponse(name, parts) for name, parts in by_topic.items()],
        throttle_time_ms=throttle_ms,
    ), throttle_ms=throttle_ms)
