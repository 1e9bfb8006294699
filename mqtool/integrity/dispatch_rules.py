"""What the broker's dispatch writes for each record, as ``mqtool verify`` and the Spark audits
check it: one home for both, over numpy columns (the names and scalar rules are
:mod:`mqtool.formats.rules`).

* Which messages have a consume-queue unit: ``CommitLogDispatcherBuildConsumeQueue#dispatch``
  builds one only for transaction types NOT_TYPE and COMMIT_TYPE (PREPARED and ROLLBACK records
  get none); the fields a unit must share with its record (:data:`CQ_UNIT_MUST_MATCH`).
* The tagsCode of a unit is the tag's hash (``tagsString2tagsCode``) except in
  ``SCHEDULE_TOPIC_XXXX`` (the deliver time) and when it is a ConsumeQueueExt address.
* Index keys: ``IndexService#buildIndex`` (UNIQ_KEY, then each KEYS token, as ``topic#key``;
  ROLLBACK records are not indexed); the entry's timeDiff is
  ``(storeTimestamp - beginTimestamp) / 1000`` clamped to ``0..Integer.MAX_VALUE``
  (``IndexFile#putKey``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, cast

from mqtool.formats.rules import NOT_IN_CONSUME_QUEUE as NOT_IN_CONSUME_QUEUE
from mqtool.formats.rules import SCHEDULE_TOPIC
from mqtool.formats.rules import TRANSACTION_TYPE_MASK as TRANSACTION_TYPE_MASK
from mqtool.formats.rules import index_keys as _index_keys

if TYPE_CHECKING:  # imported by the vectorised rules that use it
    import numpy as np

CQ_UNIT_MUST_MATCH = ("topic", "queueId", "queueOffset", "storeSize")
"""Fields of the record a consume-queue unit points at that must be the unit's own."""


def expected_in_cq(sys_flag: np.ndarray) -> np.ndarray:
    """Mask of the records (by sysFlag) that must have a consume-queue unit."""
    import numpy as np

    tran = np.asarray(sys_flag) & TRANSACTION_TYPE_MASK
    return ~np.isin(tran, NOT_IN_CONSUME_QUEUE)


_Col = TypeVar("_Col")  # a numpy array or a Spark column of ints


def prev_index_bad(prev: _Col, entry: _Col) -> _Col:
    """Whether index entries (numbers ``entry``) break ``IndexFile``'s chain: an entry's
    prevIndex names an earlier entry, or none with 0 (elementwise, for numpy arrays and for
    Spark columns alike)."""
    p: Any = prev
    return cast(_Col, (p < 0) | (p >= entry))


def tags_code_is_tag_hash(topic: str) -> bool:
    """Whether units of ``topic`` carry the tag hash as tagsCode."""
    return topic != SCHEDULE_TOPIC


def index_keys(topic: str, properties: dict[str, str]) -> list[str]:
    """The ``topic#key`` strings ``IndexService#buildIndex`` indexes for one record."""
    return _index_keys(topic, properties)


def index_time_diffs(store_timestamps: np.ndarray, begin_timestamp: int) -> np.ndarray:
    """``IndexFile#putKey``'s timeDiff in seconds for entries after the file's first."""
    import numpy as np

    ts = np.asarray(store_timestamps, dtype=np.int64)
    if begin_timestamp <= 0:
        return np.zeros(len(ts), np.int64)
    d = np.trunc((ts - begin_timestamp) / 1000).astype(np.int64)  # Java long division truncates
    return np.clip(d, 0, 0x7FFFFFFF)
