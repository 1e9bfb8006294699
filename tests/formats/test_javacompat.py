"""formats/javacompat.py: the one home of Java String.hashCode and Java map iteration order."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.formats import javacompat

ROOT = Path(__file__).resolve().parents[2]


def test_string_hash_known_values() -> None:
    assert javacompat.java_string_hash("") == 0
    assert javacompat.java_string_hash("TagA") == 2598919
    assert javacompat.java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    # UTF-16 units
    assert javacompat.java_string_hash("\U0001f600") == javacompat.to_int32(0xD83D * 31 + 0xDE00)


@given(st.lists(st.tuples(st.text(max_size=6), st.text(max_size=12)), max_size=20))
def test_vectorised_hash_equals_scalar(pairs: list[tuple[str, str]]) -> None:
    prefixes = [javacompat.java_hash_unsigned(p) for p, _ in pairs]
    keys = [k for _, k in pairs]
    got = javacompat.java_hash_continue_many(prefixes, keys).tolist()
    assert got == [javacompat.java_hash_unsigned(p + k) for p, k in pairs]


@given(st.lists(st.tuples(st.text(max_size=6), st.text(alphabet=st.characters(max_codepoint=127),
                                                      min_size=30, max_size=400)), max_size=8))
def test_vectorised_hash_of_long_keys_equals_scalar(pairs: list[tuple[str, str]]) -> None:
    """Keys as long as UNIQ_KEYs and longer (their prefix term and weighted sum may wrap past
    64 bits, which keeps them right modulo 2**32)."""
    prefixes = [javacompat.java_hash_unsigned(p) for p, _ in pairs]
    keys = [k for _, k in pairs]
    got = javacompat.java_hash_continue_many(prefixes, keys).tolist()
    assert got == [javacompat.java_hash_unsigned(p + k) for p, k in pairs]


@given(st.lists(st.text(max_size=8), unique=True, max_size=40))
def test_hashmap_order_is_the_emulated_map(keys: list[str]) -> None:
    pairs = ((k, "") for k in keys)
    assert javacompat.hashmap_order(keys) == list(javacompat.JavaHashMap.from_pairs(pairs).keys())


@settings(deadline=None)  # the first example compiles the numba loop
@given(st.lists(st.tuples(st.text(max_size=6), st.text(max_size=12)), max_size=20))
def test_compiled_hash_ranges_equal_scalar(pairs: list[tuple[str, str]]) -> None:
    """javahash's compiled loop (behind java_hash_ranges / java_token_hashes) is the same
    String.hashCode as the scalar rule, non-ASCII text included."""
    blobs = [k.encode("utf-8", "surrogatepass") for _, k in pairs]
    buf = np.frombuffer(b"".join(blobs) or b"\0", dtype=np.uint8)
    starts = np.cumsum([0] + [len(b) for b in blobs[:-1]]) if blobs else np.zeros(0)
    lengths = np.array([len(b) for b in blobs], dtype=np.int64)
    init = np.array([javacompat.java_hash_unsigned(p) for p, _ in pairs], dtype=np.int64)
    got = javacompat.java_hash_ranges(buf, np.asarray(starts), lengths, init).tolist()
    assert got == [javacompat.java_hash_unsigned(p + k) for p, k in pairs]
    rows, hashes = javacompat.java_token_hashes(buf, np.asarray(starts), lengths, " ", init)
    want = [(i, javacompat.java_hash_unsigned(pairs[i][0] + t))
            for i, (_, k) in enumerate(pairs) for t in k.split(" ") if t]
    assert list(zip(rows.tolist(), hashes.tolist(), strict=True)) == want


def test_compiled_ascii_hash_is_java_hash() -> None:
    import numpy as np
    from numba import njit

    f = javacompat.compiled_ascii_hash()

    @njit
    def run(buf: np.ndarray, start: int, length: int, h: int) -> int:
        return int(f(buf, start, length, h))

    for text in ["", "a", "TagA", "Tag With Space", "0A00000700002A9F" * 4, "~" * 300]:
        buf = np.frombuffer(b"xy" + text.encode("ascii"), dtype=np.uint8)
        assert run(buf, 2, len(text), 0) == javacompat.java_hash_unsigned(text)
        pre = javacompat.java_hash_unsigned("Topic#")
        assert run(buf, 2, len(text), pre) == javacompat.java_hash_unsigned("Topic#" + text)


def test_no_second_java_hash_in_the_tree() -> None:
    """String.hashCode's recurrence (31 * h + c) is written once: in javacompat, whose compiled
    loop for byte ranges is javahash (called only through javacompat, tested equal above)."""
    home = {"javacompat.py", "javahash.py"}
    hits = [
        str(p.relative_to(ROOT))
        for folder in ("formats", "mqtool", "spark")
        for p in (ROOT / folder).rglob("*.py")
        if p.name not in home and re.search(r"31 \* h|h \* 31", p.read_text(encoding="utf-8"))
    ]
    assert hits == []
    users = [
        str(p.relative_to(ROOT))
        for folder in ("formats", "mqtool", "spark")
        for p in (ROOT / folder).rglob("*.py")
        if p.name not in home and "javahash" in p.read_text(encoding="utf-8")
    ]
    assert users == []
