"""``mqtool trace``: one message's whole journey through a store, by message id or key.

RocketMQ spreads what happened to a message over several topics (FORMATS.md 6.7): the original
record, copies waiting in ``SCHEDULE_TOPIC_XXXX`` (``REAL_TOPIC``/``REAL_QID``), redeliveries in
``%RETRY%<group>`` (``RETRY_TOPIC``, ``ORIGIN_MESSAGE_ID``), 5.x POP retry topics
(``%RETRY%<group>_<topic>``, ``%RETRY%<group>+<topic>``), timer copies in ``rmq_sys_wheel_timer``,
transaction half/op records, the dead-letter copy in ``%DLQ%<group>`` and copies resent from
there. Every copy keeps the client's ``UNIQ_KEY``; copies of a message without one are tied to
it by ``ORIGIN_MESSAGE_ID`` (the offsetMsgId of the first copy).

Records are found through the index files when there are any (``topic#UNIQ_KEY`` in every
topic, then the commitlog written after the last indexed record), otherwise by one pass over the
commitlog that looks for the property bytes and parses only the records that hold them.

The result is data (:class:`Trace`); rendering lives in ``mqtool/cli/trace.py``.
"""

from mqtool.trace.hops import fmt_duration as fmt_duration
from mqtool.trace.journey import scan_for as scan_for
from mqtool.trace.journey import trace_id as trace_id
from mqtool.trace.journey import trace_key as trace_key
from mqtool.trace.results import RESEND_PROPERTY_NAMES as RESEND_PROPERTY_NAMES
from mqtool.trace.results import RESEND_PROPERTY_PREFIX as RESEND_PROPERTY_PREFIX
from mqtool.trace.results import RESEND_TARGET_PLACEHOLDER as RESEND_TARGET_PLACEHOLDER
from mqtool.trace.results import ClientEvent as ClientEvent
from mqtool.trace.results import ConsumerState as ConsumerState
from mqtool.trace.results import Hop as Hop
from mqtool.trace.results import KeyTrace as KeyTrace
from mqtool.trace.results import Trace as Trace
from mqtool.trace.results import TraceError as TraceError
