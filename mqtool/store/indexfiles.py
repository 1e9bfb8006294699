"""A store's index files as key lookups and listings use them (the :class:`~mqtool.store.Store`
part that opens, checks and queries ``index/``).

Opening checks each file's header and slot table (cheap); the per-entry table check, whose cost
grows with the file (up to 20 M entries), runs once when a listing (``index``, ``inspect``,
``verify``, ``scan``) first asks for it. A key lookup checks the chain it walks instead
(:meth:`mqtool.formats.indexfile.IndexReader.lookup_hash_at`). A damaged file is a finding and
is not used by lookups, which then read the commitlog.
The store's own time reads the headers alone (:meth:`IndexFiles.index_headers`).
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from pathlib import Path

from mqtool.formats.errors import Finding, FormatError
from mqtool.formats.indexfile import (
    INDEX_HEADER_SIZE,
    IndexHeader,
    IndexReader,
    build_key,
    index_key_hash,
    parse_header,
)
from mqtool.formats.store_dirs import INDEX_DIR, index_files
from mqtool.store.files import misnamed


def listed_index_files(index_dir: Path, note: Callable[[Finding], object]) -> list[Path]:
    """The index files of ``index_dir``, oldest first; each other file there is a finding given
    to ``note``."""
    others: list[Path] = []
    names = index_files(index_dir, others)
    for p in others:
        note(misnamed(f"{INDEX_DIR}/{p.name}", "an index file name (digits)"))
    return names


class IndexFiles:
    """Mixin of :class:`mqtool.store.Store` (which holds the fields declared here)."""

    root: Path
    live: bool
    _index: list[tuple[str, IndexReader]] | None
    _index_damaged: bool
    _index_entries_checked: bool

    def _map(self, path: Path) -> bytes | mmap.mmap:
        raise NotImplementedError

    def _note(self, f: Finding) -> None:
        raise NotImplementedError

    @property
    def index_dir(self) -> Path:
        return self.root / INDEX_DIR

    def index_files(self, entries: bool = True) -> list[tuple[str, IndexReader]]:
        """Readable index files, oldest first (damaged ones become findings).

        ``entries=False`` (key lookups) skips the per-entry table check, whose cost grows with
        the files: a lookup checks the chains it walks (:meth:`Finder`). The full check runs
        once, the first time a caller asks for it.
        """
        if self._index is None:
            self._index = []
            names = listed_index_files(self.index_dir, self._note)
            for p in names:  # a running broker writes its newest file only
                self._open_index(p, live=self.live and p == names[-1])
        if entries and not self._index_entries_checked:
            self._index_entries_checked = True
            for rel, reader in list(self._index):  # their cheap checks held: entries now
                self._index_problems(rel, reader.problems(), reader)
        return self._index

    def index_headers(self) -> list[IndexHeader]:
        """The index files' headers, oldest first, read without the checks of
        :meth:`index_files` (whose slot check reads the slot table and each used slot's head
        entry: tens of milliseconds for a full file): what the store's own time reads
        (:func:`mqtool.overview.store_time`). A header cut short is a finding."""
        out: list[IndexHeader] = []
        for p in listed_index_files(self.index_dir, self._note):
            rel = f"index/{p.name}"
            buf = self._map(p)  # mapped once: index_files reads the same mapping
            if not buf and self.live:
                continue  # a file the broker is making, or deleted meanwhile: no entries
            try:
                out.append(parse_header(buf[:INDEX_HEADER_SIZE], file=rel))
            except FormatError as err:
                self._index_problems(rel, [err], None)
        return out

    def _open_index(self, p: Path, live: bool = False) -> None:
        rel = f"index/{p.name}"
        reader: IndexReader | None = None
        try:
            buf = self._map(p)
            if not buf and self.live:
                return  # a file the broker is making, or deleted meanwhile: no entries
            reader = IndexReader(buf, file=rel, live=live)
            problems = reader.problems(entries=False)
        except FormatError as err:
            problems = [err]
        if not self._index_problems(rel, problems, reader) and reader is not None:
            assert self._index is not None
            self._index.append((rel, reader))

    def _index_problems(
        self, rel: str, problems: list[FormatError], reader: IndexReader | None
    ) -> bool:
        """Note an index file's problems; a damaged file is no longer used by lookups."""
        for pr in problems:
            self._note(Finding("index", rel, pr.offset, pr.detail,
                               expected=pr.expected, found=pr.found))
        if problems:
            self._index_damaged = True
            if self._index is not None and reader is not None:
                self._index[:] = [(r, x) for r, x in self._index if x is not reader]
        return bool(problems)

    @property
    def has_index(self) -> bool:
        return bool(self.index_files(entries=False))

    @property
    def index_usable(self) -> bool:
        """Whether key lookups may go through the index: there are index files and none is
        damaged (a damaged one could hide records; lookups then read the commitlog)."""
        files = self.index_files(entries=False)
        return bool(files) and not self._index_damaged

    def mark_index_damaged(self) -> None:
        """A lookup met an entry that leads nowhere: key lookups read the commitlog now."""
        self._index_damaged = True

    @property
    def index_damaged(self) -> bool:
        """Whether some index file is damaged as far as checked (see the ``index`` findings;
        lookups check the chains they walk, :meth:`index_files` the whole tables)."""
        self.index_files(entries=False)
        return self._index_damaged

    def query_index(self, topic: str, key: str) -> list[int]:
        """Commitlog offsets the index files list for ``topic#key`` (hash matches only)."""
        h = index_key_hash(build_key(topic, key))
        out: list[int] = []
        for _, reader in self.index_files():
            out.extend(e.phy_offset for e in reversed(reader.lookup_hash(h)))
        return out
