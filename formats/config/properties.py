"""Java ``.properties`` files (``broker.conf``), read as ``java.util.Properties#load`` does.

The broker reads its config file with ``Properties.load(InputStream)`` (``BrokerStartup``) and
copies each key onto ``BrokerConfig`` / ``MessageStoreConfig`` by setter name
(``MixAll#properties2Object``; a String value is used as is, not trimmed). The rules of
``Properties.load`` followed here:

* the bytes are ISO-8859-1; other characters come in as ``\\uXXXX`` escapes;
* natural lines end at ``\\n``, ``\\r`` or ``\\r\\n``; a line ending in an odd number of
  backslashes continues on the next line, whose leading white space is dropped;
* blank lines and lines whose first non-white character is ``#`` or ``!`` are comments (a
  comment never continues);
* white space is space, tab and form feed; the key ends at the first unescaped ``=``, ``:`` or
  white space; then white space, at most one ``=`` or ``:``, and white space are skipped; the
  rest of the line is the value (trailing white space kept);
* escapes ``\\t \\n \\r \\f \\uXXXX``; a backslash before any other character stands for that
  character; a malformed ``\\uXXXX`` is an error (``IllegalArgumentException``);
* a key given twice keeps its last value.
"""

from __future__ import annotations

from pathlib import Path

from mqtool.formats.errors import BadConfigError

_WHITE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(byte offset of the line's start, logical line with continuations joined, raw)."""
    out: list[tuple[int, str]] = []
    pos = 0
    n = len(text)
    cur: list[str] = []
    start = 0
    continuing = False
    while pos <= n:
        end = pos
        while end < n and text[end] not in "\r\n":
            end += 1
        line = text[pos:end]
        nxt = end + (2 if text.startswith("\r\n", end) else 1)
        if continuing:
            line = line.lstrip(_WHITE)
        elif not line.lstrip(_WHITE) or line.lstrip(_WHITE)[0] in "#!":
            pos = nxt
            if end >= n:
                break
            continue
        else:
            start = pos
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2 == 1:
            cur.append(line[:-1])
            continuing = True
        else:
            cur.append(line)
            out.append((start, "".join(cur)))
            cur = []
            continuing = False
        if end >= n:
            break
        pos = nxt
    if cur:  # a continuation at the end of the file: what was read stands
        out.append((start, "".join(cur)))
    return out


def _unescape(s: str, file: str, offset: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 >= len(s):
            # a lone backslash at the very end (an odd continuation at EOF) is dropped by Java
            if c != "\\":
                out.append(c)
            i += 1
            continue
        e = s[i + 1]
        if e == "u":
            digits = s[i + 2:i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise BadConfigError(file, offset, f"malformed \\uxxxx encoding: \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(e, e))
        i += 2
    return "".join(out)


def _split_key(line: str) -> tuple[str, str]:
    """Raw (still escaped) key and value of one logical line."""
    i = len(line) - len(line.lstrip(_WHITE))
    k0 = i
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WHITE:
            break
        i += 1
    key = line[k0:min(i, len(line))]
    j = i
    while j < len(line) and line[j] in _WHITE:
        j += 1
    if j < len(line) and line[j] in "=:":
        j += 1
        while j < len(line) and line[j] in _WHITE:
            j += 1
    return key, line[j:]


def parse_properties(data: bytes | str, *, file: str = "<properties>") -> dict[str, str]:
    """Every key and value of a ``.properties`` text (bytes are ISO-8859-1)."""
    text = data.decode("latin-1") if isinstance(data, bytes) else data
    props: dict[str, str] = {}
    for start, line in _logical_lines(text):
        raw_key, raw_value = _split_key(line)
        props[_unescape(raw_key, file, start)] = _unescape(raw_value, file, start)
    return props


def load_properties(path: str | Path) -> dict[str, str]:
    """Read ``path`` as the broker reads its ``-c`` config file (BadConfigError if unreadable)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise BadConfigError(str(p), None, f"cannot read: {e.strerror or e}") from e
    return parse_properties(data, file=str(p))
