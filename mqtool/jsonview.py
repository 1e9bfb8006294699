"""The JSON shapes of mqtool's machine output (field names follow RocketMQ's ``MessageExt``).

The conformance checker and later tools rely on these names: change them only with the
contract in the foundation issue.
"""

from __future__ import annotations

import base64
from typing import Any

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import MqtoolError
from mqtool.store import QueueEntry

BODY_MODES = ("none", "utf8", "hex", "base64")


def body_value(m: CommitLogMessage, mode: str) -> str | None:
    """The body rendered for output: ``none`` (omitted), ``utf8``, ``hex`` or ``base64``.

    Compressed bodies are inflated first for ``utf8`` (as a consumer would see them); ``hex``
    and ``base64`` give the bytes as stored.
    """
    if mode == "none":
        return None
    if mode == "utf8":
        try:
            data = m.decompressed_body()
        except MqtoolError:
            data = m.body
        return data.decode("utf-8", "replace")
    if mode == "hex":
        return m.body.hex()
    if mode == "base64":
        return base64.b64encode(m.body).decode("ascii")
    raise ValueError(mode)


def message_dict(m: CommitLogMessage, body: str = "none") -> dict[str, Any]:
    """One message as the ``mqtool messages --jsonl`` contract shapes it."""
    d: dict[str, Any] = {
        "commitLogOffset": m.physical_offset,
        "storeSize": m.total_size,
        "magic": f"{m.magic:#010x}",
        "topic": m.topic,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "flag": m.flag,
        "sysFlag": m.sys_flag,
        "bodyCRC": m.body_crc,
        "bornTimestamp": m.born_timestamp,
        "bornHost": str(m.born_host),
        "storeTimestamp": m.store_timestamp,
        "storeHost": str(m.store_host),
        "reconsumeTimes": m.reconsume_times,
        "preparedTransactionOffset": m.prepared_transaction_offset,
        "bodyLength": m.body_length,
        "properties": m.properties,
        "tags": m.tags,
        "keys": m.keys,
        "uniqKey": m.uniq_key,
        "offsetMsgId": m.offset_msg_id,
        "crcOk": m.crc_ok,
        "compressionType": m.compression_type,
    }
    if body != "none":
        d["body"] = body_value(m, body)
        d["bodyEncoding"] = body
    return d


def cq_dict(q: QueueEntry) -> dict[str, Any]:
    """One consume-queue unit as the ``mqtool cq --jsonl`` contract shapes it."""
    return {
        "topic": q.topic,
        "queueId": q.queue_id,
        "queueOffset": q.queue_offset,
        "commitLogOffset": q.entry.commit_log_offset,
        "storeSize": q.entry.size,
        "tagsCode": q.entry.tags_code,
        "file": q.file,
        "fileOffset": q.file_offset,
    }
