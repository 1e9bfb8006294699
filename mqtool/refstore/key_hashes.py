"""Java hashes of tags and index keys for the write path, cached and vectorised.

Records are encoded by the one encoder, :mod:`mqtool.formats.encoder`. :func:`index_hashes`
computes ``String.hashCode`` of many ``topic#key`` index keys at once (Horner's rule continued
from the topic prefix's hash, vectorised per key length); :class:`JavaHashCache` does single
keys and caches tag hashes.
"""

from __future__ import annotations

from mqtool.formats.indexfile import index_key_hashes
from mqtool.formats.javacompat import java_hash_unsigned, to_int32

__all__ = ["JavaHashCache", "index_hashes", "java_hash_unsigned"]

class JavaHashCache:
    """Incremental Java hashes for index keys (``topic#key``) and tags."""

    def __init__(self) -> None:
        self._tags: dict[str, int] = {}
        self._topic_prefix: dict[str, int] = {}

    def tags_code(self, tags: str | None) -> int:
        """``tagsString2tagsCode`` (signed)."""
        if not tags:
            return 0
        h = self._tags.get(tags)
        if h is None:
            h = to_int32(java_hash_unsigned(tags))
            if len(self._tags) < 100_000:
                self._tags[tags] = h
        return h

    def index_hash(self, topic: str, key: str) -> int:
        """``indexKeyHashMethod(topic + "#" + key)``: abs of the signed hash, MIN -> 0."""
        h = self._topic_prefix.get(topic)
        if h is None:
            h = java_hash_unsigned(topic + "#")
            self._topic_prefix[topic] = h
        return _abs32(java_hash_unsigned(key, h))



def _abs32(u: int) -> int:
    if u & 0x80000000:
        if u == 0x80000000:
            return 0
        return (1 << 32) - u
    return u


def index_hashes(prefixes: list[int], keys: list[str]) -> list[int]:
    """``indexKeyHashMethod(topic + "#" + key)`` for many keys at once (the rule's home:
    :func:`mqtool.formats.indexfile.index_key_hashes`)."""
    return index_key_hashes(prefixes, keys)
