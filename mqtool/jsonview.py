"""The JSON shapes of mqtool's machine output (field names follow RocketMQ's ``MessageExt``).

The conformance checker and other tools rely on these names: they are a contract, changed
only together with every reader of them.
"""

from __future__ import annotations

import base64
from typing import Any

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import MqtoolError
from mqtool.store.files import QueueEntry

BODY_MODES = ("none", "utf8", "hex", "base64")


def encode_bytes(data: bytes, mode: str) -> tuple[str, str]:
    """``data`` as text in ``mode`` (utf8, hex or base64), and the encoding actually used.

    ``utf8`` is used only for valid UTF-8: other bytes are never replaced (U+FFFD would lose
    them while still claiming utf8). They come back as base64, labelled ``base64``.
    """
    if mode == "utf8":
        try:
            return data.decode("utf-8"), "utf8"
        except UnicodeDecodeError:
            return base64.b64encode(data).decode("ascii"), "base64"
    if mode == "hex":
        return data.hex(), "hex"
    if mode == "base64":
        return base64.b64encode(data).decode("ascii"), "base64"
    raise ValueError(mode)


def body_encoded(m: CommitLogMessage, mode: str) -> tuple[str | None, str]:
    """The body rendered for output, and its encoding: ``none`` (omitted), ``utf8``, ``hex``
    or ``base64``.

    Compressed bodies are inflated first for ``utf8`` (as a consumer would see them); ``hex``
    and ``base64`` give the bytes as stored. A body that ``utf8`` cannot show exactly (not
    UTF-8, or a compressed body that does not inflate) is given as ``base64`` of the bytes as
    stored, and labelled so.
    """
    if mode == "none":
        return None, "none"
    if mode == "utf8":
        try:
            text, enc = encode_bytes(m.decompressed_body(), "utf8")
        except MqtoolError:
            enc = "damaged"
        if enc == "utf8":
            return text, enc
        return encode_bytes(m.body, "base64")
    return encode_bytes(m.body, mode)


def body_value(m: CommitLogMessage, mode: str) -> str | None:
    """The body as one text value (tables, CSV). When ``utf8`` could not show it, the value
    says so: ``base64:<base64 of the bytes as stored>``."""
    value, enc = body_encoded(m, mode)
    if value is not None and enc != mode:
        return f"{enc}:{value}"
    return value


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
        d["body"], d["bodyEncoding"] = body_encoded(m, body)
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
