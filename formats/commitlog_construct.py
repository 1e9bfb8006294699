"""The readable reference layout of a commitlog message record, in construct
(:data:`COMMITLOG_RECORD`): slow, for tests and tooling; tests prove it equal to the fast
struct codec in :mod:`mqtool.formats.commitlog` (``parse_message`` / ``build_message``)."""

from __future__ import annotations

from typing import Any

import construct as cs

from mqtool.formats.commitlog import (
    BORNHOST_V6_FLAG,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOSTADDRESS_V6_FLAG,
    CommitLogMessage,
    HostPort,
    cal_msg_length,
)
from mqtool.formats.errors import FormatError


def _rebuild_total(ctx: Any) -> int:
    return cal_msg_length(
        ctx.magic, ctx.sys_flag, len(ctx.body), len(ctx.topic.encode("utf-8")),
        len(ctx.properties.encode("utf-8")),
    )


HostV4 = cs.Struct("ip" / cs.Bytes(4), "port" / cs.Int32sb)
HostV6 = cs.Struct("ip" / cs.Bytes(16), "port" / cs.Int32sb)

COMMITLOG_RECORD = cs.Struct(
    "total_size" / cs.Rebuild(cs.Int32sb, _rebuild_total),
    "magic" / cs.OneOf(cs.Int32ub, [MAGIC_V1, MAGIC_V2]),
    "body_crc" / cs.Int32sb,
    "queue_id" / cs.Int32sb,
    "flag" / cs.Int32sb,
    "queue_offset" / cs.Int64sb,
    "physical_offset" / cs.Int64sb,
    "sys_flag" / cs.Int32sb,
    "born_timestamp" / cs.Int64sb,
    "born_host" / cs.IfThenElse(cs.this.sys_flag & BORNHOST_V6_FLAG, HostV6, HostV4),
    "store_timestamp" / cs.Int64sb,
    "store_host" / cs.IfThenElse(cs.this.sys_flag & STOREHOSTADDRESS_V6_FLAG, HostV6, HostV4),
    "reconsume_times" / cs.Int32sb,
    "prepared_transaction_offset" / cs.Int64sb,
    "body" / cs.Prefixed(cs.Int32sb, cs.GreedyBytes),
    "topic" / cs.IfThenElse(
        cs.this.magic == MAGIC_V2,
        cs.PascalString(cs.Int16sb, "utf8"),
        cs.PascalString(cs.Int8sb, "utf8"),
    ),
    "properties" / cs.PascalString(cs.Int16sb, "utf8"),
    cs.Check(cs.this.total_size == _rebuild_total),
)
"""The readable reference layout of one message record (construct)."""

BLANK_RECORD = cs.Struct("total_size" / cs.Int32sb, "magic" / cs.Const(MAGIC_BLANK, cs.Int32ub))


def parse_message_construct(
    data: bytes, *, file: str | None = None, offset: int = 0
) -> CommitLogMessage:
    """Decode one record with the construct reference (slow; for tests and tooling)."""
    try:
        c = COMMITLOG_RECORD.parse(data)
    except (cs.ConstructError, UnicodeDecodeError) as e:
        raise FormatError(file, offset, f"not a message record: {e}") from e
    return CommitLogMessage(
        c.total_size, c.magic, c.body_crc, c.queue_id, c.flag, c.queue_offset,
        c.physical_offset, c.sys_flag, c.born_timestamp,
        HostPort.from_packed(c.born_host.ip, c.born_host.port), c.store_timestamp,
        HostPort.from_packed(c.store_host.ip, c.store_host.port), c.reconsume_times,
        c.prepared_transaction_offset, c.body, c.topic, c.properties,
    )


def build_message_construct(msg: CommitLogMessage) -> bytes:
    """Encode ``msg`` with the construct reference (slow; proven equal to build_message)."""
    return bytes(
        COMMITLOG_RECORD.build(
            {
                "magic": msg.magic, "body_crc": msg.body_crc, "queue_id": msg.queue_id,
                "flag": msg.flag, "queue_offset": msg.queue_offset,
                "physical_offset": msg.physical_offset, "sys_flag": msg.sys_flag,
                "born_timestamp": msg.born_timestamp,
                "born_host": {"ip": msg.born_host.packed, "port": msg.born_host.port},
                "store_timestamp": msg.store_timestamp,
                "store_host": {"ip": msg.store_host.packed, "port": msg.store_host.port},
                "reconsume_times": msg.reconsume_times,
                "prepared_transaction_offset": msg.prepared_transaction_offset,
                "body": msg.body, "topic": msg.topic, "properties": msg.properties_raw,
            }
        )
    )
