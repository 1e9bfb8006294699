"""Dead-letter queues: read ``%DLQ%<group>`` and resend its records, exactly once.

Rooms:

* :mod:`~mqtool.dlq.selection`: list groups, select records (filters), export shapes (read only);
* :mod:`~mqtool.dlq.outgoing`: the resent copy of a record (what it keeps, drops, where it goes);
* :mod:`~mqtool.dlq.journal`: the write-ahead, fsynced, group-committed resend journal;
* :mod:`~mqtool.dlq.targets`: where copies go (a store directory) and the target safety check;
* :mod:`~mqtool.dlq.resend`: the run (skip done, resolve pending, send, report).
"""

from mqtool.dlq.selection import (
    CSV_COLUMNS,
    DlqError,
    DlqGroup,
    DlqSelection,
    csv_header,
    csv_row,
    dlq_topic,
    export_dict,
    group_of,
    list_groups,
    origin_msg_id,
    original_topic,
    require_group,
    retry_topic,
    select_dlq,
)

__all__ = [
    "CSV_COLUMNS",
    "DlqError",
    "DlqGroup",
    "DlqSelection",
    "csv_header",
    "csv_row",
    "dlq_topic",
    "export_dict",
    "group_of",
    "list_groups",
    "origin_msg_id",
    "original_topic",
    "require_group",
    "retry_topic",
    "select_dlq",
]
