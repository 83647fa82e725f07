"""Salvaging rosbag2 sqlite3 files (.db3) cut short or damaged on disk, page by page.

SQLite (sqlite.org/fileformat.html) stores a table as a B-tree of fixed-size pages. A cut file
loses its last pages, and with them interior pages that SQLite needs to reach the leaves that
are still there; so this reader does not walk the tree. It reads every page, and takes the
rows of rosbag2's `messages` table from the table leaf pages (type 13), recognised by their
record's shape, which no other rosbag2 table has: four columns, the id (NULL: it is the rowid),
two integers (topic_id, timestamp) and a blob (data). A leaf page lists its cells through a
pointer array; a page whose header or pointers are damaged is searched for such records
instead. Payloads longer than a page continue on overflow pages, followed here as SQLite does.
The small tables (schema, topics, message_definitions) sit on the first pages and are read
with SQL.
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import apsw
from rosbags.interfaces import Connection, ConnectionExtRosbag2, MessageDefinition, MessageDefinitionFormat
from rosbags.rosbag2.errors import ReaderError
from rosbags.rosbag2.metadata import ReaderMetadata, parse_qos

from .blocks import Block, OwnedFile, messages_between
from .report import Salvage

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator

MAGIC = b"SQLite format 3\x00"
TABLE_LEAF = 13
_OTHER_PAGES = {2, 5, 10}  # index interior, table interior, index leaf: never message rows
_INTS = {1, 2, 3, 4, 5, 6, 8, 9}  # serial types of integers (8 and 9: the constants 0 and 1)
_FIXED_SIZE = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8, 7: 8, 8: 0, 9: 0}  # bytes by serial type
# A messages record header: its size (5 to 8 bytes), NULL id, two integer serial types.
_RECORD = re.compile(rb"[\x05-\x08]\x00[\x01-\x06\x08\x09][\x01-\x06\x08\x09]")
_GROUP = 256  # pages read as one block (1 MiB of 4 KiB pages)
_MSGDEF_FORMATS = {"ros2msg": MessageDefinitionFormat.MSG, "ros2idl": MessageDefinitionFormat.IDL}


class Row(NamedTuple):
    rowid: int
    topic_id: int
    timestamp: int
    data: bytes
    page: int


class _Cell(NamedTuple):
    """A messages row as stored in its page: the payload there, where it continues."""

    rowid: int
    topic_id: int
    timestamp: int
    local: bytes     # the data blob's bytes held in the page
    blob: int        # the blob's full size
    overflow: int    # first overflow page, 0 for none
    size: int        # bytes of the cell in its page


OTHER = "other"  # a sound cell of another table


def varint(data: bytes, pos: int) -> tuple[int, int]:
    """SQLite's big-endian varint at `pos`: its value and where it ends (IndexError past the data)."""
    byte = data[pos]
    if byte < 0x80:  # most are one byte: serial types, small sizes
        return byte, pos + 1
    value = byte & 0x7F
    for i in range(1, 8):
        byte = data[pos + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, pos + i + 1
    return (value << 8) | data[pos + 8], pos + 9


class Layout(NamedTuple):
    """The file's page size and the usable bytes of a page (without the reserved tail)."""

    page: int
    usable: int

    def local(self, payload: int) -> int:
        """Bytes of a table leaf cell's payload kept in its page (the rest overflows)."""
        u = self.usable
        biggest = u - 35
        if payload <= biggest:
            return payload
        least = (u - 12) * 32 // 255 - 23
        keep = least + (payload - least) % (u - 4)
        return keep if keep <= biggest else least


def parse_cell(page: bytes, pos: int, layout: Layout) -> _Cell | str | None:
    """The messages row of the table leaf cell at `pos`; OTHER for a sound row of another
    table; None when no row is readable there (damage, or a cell past the end of a cut page)."""
    cell = pos
    try:
        payload, pos = varint(page, pos)
        rowid, start = varint(page, pos)
        header, pos = varint(page, start)
        types = []
        while pos < start + header:
            serial, pos = varint(page, pos)
            types.append(serial)
    except IndexError:
        return None
    sizes = _value_sizes(types)
    if pos != start + header or sizes is None or header + sum(sizes) != payload:
        return None
    if len(types) != 4 or types[0] != 0 or types[1] not in _INTS or types[2] not in _INTS:
        return OTHER
    if types[3] < 12 or types[3] % 2:  # not a blob
        return OTHER
    blob = (types[3] - 12) // 2
    ints = sizes[1] + sizes[2]
    local = layout.local(payload)
    end = start + local + (4 if local < payload else 0)
    if end > len(page):
        return None
    topic_id = _int(page, pos, types[1])
    timestamp = _int(page, pos + sizes[1], types[2])
    overflow = int.from_bytes(page[end - 4 : end], "big") if local < payload else 0
    return _Cell(rowid, topic_id, timestamp, page[pos + ints : start + local], blob, overflow, end - cell)


def _value_sizes(types: list[int]) -> list[int] | None:
    """Bytes of each value of a record by its serial types; None for the reserved 10 and 11."""
    sizes = [(t - 12) // 2 if t >= 12 else _FIXED_SIZE.get(t, -1) for t in types]
    return None if -1 in sizes else sizes


def _int(page: bytes, pos: int, serial: int) -> int:
    if serial in (8, 9):
        return serial - 8
    return int.from_bytes(page[pos : pos + _FIXED_SIZE[serial]], "big", signed=True)


def page_cells(page: bytes, header: int, layout: Layout) -> tuple[list[_Cell], int, bool]:
    """The messages rows of a page, how many listed cells were unreadable, and whether rows
    had to be searched for. Through the pointer array when the page's header holds together;
    else, or when some pointer fails, by searching the page for records of the messages shape."""
    listed, bad = _listed(page, header, layout)
    if listed is not None and not bad:
        return listed, 0, False
    found = {c.rowid: c for c in _searched(page, layout)}
    extra = len(found.keys() - {c.rowid for c in listed or ()})
    found.update({c.rowid: c for c in listed or ()})
    return sorted(found.values()), max(0, bad - extra), extra > 0


def _listed(page: bytes, header: int, layout: Layout) -> tuple[list[_Cell] | None, int]:
    """The cells of a table leaf page by its pointers, and the count that did not parse (at
    least one when the cells do not fill the content area, as rosbag2's appended rows do); None
    when the header does not hold together (not a table leaf, pointers past the content)."""
    if len(page) < header + 8 or page[header] != TABLE_LEAF:
        return None, 0
    count = int.from_bytes(page[header + 3 : header + 5], "big")
    content = int.from_bytes(page[header + 5 : header + 7], "big") or 65536
    pointers = header + 8
    if not pointers + 2 * count <= min(content, len(page)) or content > layout.page:
        return None, 0
    cells, bad, others = [], 0, 0
    for at in struct.unpack_from(f">{count}H", page, pointers):
        cell = parse_cell(page, at, layout) if content <= at < layout.usable else None
        if isinstance(cell, _Cell):
            cells.append(cell)
        elif cell is None:
            bad += 1
        else:
            others += 1
    # A damaged count or pointer can hide cells: then they are searched for.
    hidden = not others and sum(c.size for c in cells) < layout.usable - content
    return cells, max(bad, int(hidden))


def _searched(page: bytes, layout: Layout) -> Iterator[_Cell]:
    """Cells found by the shape of their record header; the payload size and rowid varints
    before it are read back from the record's start (a varint's last byte is below 0x80)."""
    taken = 0
    for match in _RECORD.finditer(page):
        record = match.start()
        if record < taken:
            continue
        rowid_start = record - 1
        while rowid_start > 0 and page[rowid_start - 1] >= 0x80:
            rowid_start -= 1
        for size_bytes in range(1, 5):
            cell = parse_cell(page, rowid_start - size_bytes, layout) if rowid_start - size_bytes >= taken else None
            if isinstance(cell, _Cell):
                taken = record + 1
                yield cell
                break


def header_layout(head: bytes) -> tuple[Layout, int | None]:
    """The page layout of a database header, and its page count when the header vouches for it
    (the count is valid when written by the same change as the version-valid-for number)."""
    page = int.from_bytes(head[16:18], "big")
    size = 65536 if page == 1 else page
    count = int.from_bytes(head[28:32], "big") if head[24:28] == head[92:96] else None
    return Layout(size, size - head[20]), count


def bytes_short(path: Path) -> int:
    """How many bytes the .db3 at `path` lacks: to a whole last page, or to the page count of its
    header. SQLite reads missing bytes as zeros without an error, so a cut file must not be
    read by it."""
    with path.open("rb") as file:
        head = file.read(100)
    if len(head) < 100 or not head.startswith(MAGIC):
        return 0
    layout, count = header_layout(head)
    size = path.stat().st_size
    return max(-size % layout.page, (count or 0) * layout.page - size)


class PageSource:
    """The file's pages, read on demand (never more than a block of them at a time)."""

    def __init__(self, file: Any, size: int, layout: Layout) -> None:
        self.file, self.size, self.layout = file, size, layout
        self.count = -(-size // layout.page)

    def read(self, number: int, count: int = 1) -> bytes:
        """Pages `number`... (1-based), as many bytes of them as the file holds."""
        self.file.seek((number - 1) * self.layout.page)
        return self.file.read(count * self.layout.page)

    def overflow(self, first: int, size: int) -> bytes | None:
        """`size` bytes of payload from the overflow chain starting at page `first`; None when
        a page of the chain is missing."""
        out, page, usable = [], first, self.layout.usable
        for _ in range(-(-size // (usable - 4))):
            if not 1 <= page <= self.count:
                return None
            data = self.read(page)
            if len(data) < usable:
                return None
            out.append(data[4:usable])
            page = int.from_bytes(data[:4], "big")
        joined = b"".join(out)
        return joined[:size] if len(joined) >= size else None


class SalvageSqliteReader(OwnedFile):
    """rosbags' sqlite3 storage interface (connections, metadata, messages) over a damaged
    .db3: the rows of every intact message page, in timestamp order a block of pages at a
    time. `salvage` tells what was read and what was lost."""

    def __init__(self, path: Path, expected: dict[str, int] | None = None) -> None:
        self.path = Path(path)
        self.connections: list[Connection] = []
        self.metadata = ReaderMetadata(0, 2**63 - 1, 0, 0, None, None, None, None)
        self.salvage = Salvage(self.path, "sqlite3", expected=expected)
        self._pages: PageSource | None = None
        self._blocks: list[Block] = []
        self._duplicates: set[tuple[int, int]] = set()  # (page, rowid) of rows already met

    def open(self) -> None:
        self._file = self.path.open("rb")
        try:
            head = self._file.read(100)
            if len(head) < 100 or not head.startswith(MAGIC):
                raise ReaderError(f"{self.path}: not an SQLite file")
            layout, count = header_layout(head)
            size = self.path.stat().st_size
            self._pages = PageSource(self._file, size, layout)
            if count is not None:
                self.salvage.cut_off(count * layout.page - size)
            self.connections = self._topics()
            self._scan()
        except BaseException:
            self.close()
            raise

    def _topics(self) -> list[Connection]:
        """The topics table (and message definitions), with SQL: their pages come first."""
        try:
            db = apsw.Connection(f"file:{self.path}?immutable=1",
                                 flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        except apsw.Error as err:
            raise ReaderError(f"cannot open the database: {err}") from err
        try:
            # SQLite refuses a file shorter than its header's page count unless the schema is
            # "writable"; the connection stays read-only.
            db.execute("PRAGMA writable_schema = ON")
            return _connections(db, self)
        except apsw.Error as err:
            raise ReaderError(f"the topics table is unreadable ({err})") from err
        finally:
            db.close()

    def _scan(self) -> None:
        """Reads every page once: message counts by topic, blocks in time order, damage."""
        pages = self._pages
        assert pages is not None
        topics = {c.id: c.topic for c in self.connections}
        counts: Counter[int] = Counter()
        seen = RowIds(pages.size // 16)  # a messages cell takes more than 16 bytes
        unreadable, last = 0, 0
        for group in range(1, pages.count + 1, _GROUP):
            rows, bad = self._rows(group, note=True)
            unreadable += bad
            times = []
            for row in rows:
                if not seen.add(row.rowid):
                    self._duplicates.add((row.page, row.rowid))
                    continue
                counts[row.topic_id] += 1
                times.append(row.timestamp)
            if times:
                self._blocks.append(Block(min(times), group))
                last = max(last, *times)
        self.salvage.lost_at_least = max(seen.gaps(), unreadable)
        for cid, count in counts.items():
            self.salvage.recovered[topics.get(cid, f"<unknown topic id {cid}>")] += count
        self.connections = [c._replace(msgcount=counts[c.id]) for c in self.connections]
        total = sum(counts.values())
        start = min((b.start for b in self._blocks), default=2**63 - 1)
        self.metadata = ReaderMetadata(last + 1 - start if total else 0, start, last + 1 if total else 0, total,
                                       None, None, None, None)

    def _rows(self, group: int, note: bool) -> tuple[list[Row], int]:
        """The intact messages rows of the pages of a group, and the count of rows seen but
        unreadable (a cell that does not parse, a missing overflow page)."""
        pages = self._pages
        assert pages is not None
        data, size = pages.read(group, _GROUP), pages.layout.page
        rows, unreadable = [], 0
        for i in range(0, len(data), size):
            number, page = group + i // size, data[i : i + size]
            header = 100 if number == 1 else 0
            if len(page) == size and page[header] in _OTHER_PAGES:
                continue
            cells, bad, searched = page_cells(page, header, pages.layout)
            complete = self._complete(cells, number)
            unreadable += bad + len(cells) - len(complete)
            if note and (bad or searched or len(page) < size or len(complete) < len(cells)):
                self.salvage.cut_off(size - len(page))
                self.salvage.note((number - 1) * size, 0, _page_damage(
                    number, bad, len(cells) - len(complete), searched, len(page) < size))
            rows += complete
        return rows, unreadable

    def _complete(self, cells: list[_Cell], number: int) -> list[Row]:
        """Rows with their overflowing payloads joined; those whose chain is broken are lost."""
        pages = self._pages
        assert pages is not None
        rows = []
        for cell in cells:
            rest = pages.overflow(cell.overflow, cell.blob - len(cell.local)) if cell.overflow else b""
            if rest is not None:
                rows.append(Row(cell.rowid, cell.topic_id, cell.timestamp, cell.local + rest, number))
        return rows

    def messages(self, connections: Collection[Connection], start: int | None = None,
                 stop: int | None = None) -> Iterator[tuple[Connection, int, bytes]]:
        wanted = {c.id: c for c in connections}
        yield from messages_between(self._blocks, lambda key: self._load(key, wanted), start, stop)

    def _load(self, group: int, wanted: dict[int, Connection]) -> list[tuple[int, int, tuple[Connection, int, bytes]]]:
        """The wanted rows of a group as (timestamp, rowid, message)."""
        rows, _ = self._rows(group, note=False)
        return [(r.timestamp, r.rowid, (wanted[r.topic_id], r.timestamp, r.data))
                for r in rows if r.topic_id in wanted and (r.page, r.rowid) not in self._duplicates]


def _page_damage(number: int, bad: int, broken: int, searched: bool, cut: bool) -> str:
    parts = [f"{bad} unreadable cell(s)" if bad else "",
             f"{broken} row(s) whose overflow pages are missing" if broken else "",
             "header or cell pointers damaged, rows found by their shape" if searched else "",
             "the file ends inside it" if cut else ""]
    return f"page {number}: " + ", ".join(p for p in parts if p)


class RowIds:
    """Row ids seen, as a bitmap: a row found twice (a stale copy) is read once, and the ids
    missing below the largest tell rows lost. rosbag2 numbers rows 1, 2, ...; ids beyond what
    the file could hold are taken as they come (not checked for copies, not counted in gaps)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.bits = bytearray(limit // 8 + 1)
        self.count = self.top = 0

    def add(self, rowid: int) -> bool:
        """True for a row id not seen before."""
        if not 0 < rowid <= self.limit:
            return True
        if self.bits[rowid >> 3] & (1 << (rowid & 7)):
            return False
        self.bits[rowid >> 3] |= 1 << (rowid & 7)
        self.count += 1
        self.top = max(self.top, rowid)
        return True

    def gaps(self) -> int:
        return self.top - self.count


def _connections(db: apsw.Connection, owner: object) -> list[Connection]:
    """rosbag2's topics as rosbags' connections (any schema version: columns as present)."""
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not {"topics", "messages"} <= tables:
        raise ReaderError("no topics or messages table")
    columns = {row[1] for row in db.execute("PRAGMA table_info(topics)")}
    wanted = ["id", "name", "type", "serialization_format", "offered_qos_profiles", "type_description_hash"]
    query = ", ".join(c if c in columns else "''" for c in wanted)
    definitions: dict[str, MessageDefinition] = {}
    if "message_definitions" in tables:
        for name, encoding, text in db.execute(
                "SELECT topic_type, encoding, encoded_message_definition FROM message_definitions ORDER BY id"):
            if encoding in _MSGDEF_FORMATS:
                definitions.setdefault(name, MessageDefinition(_MSGDEF_FORMATS[encoding], text))
    none = MessageDefinition(MessageDefinitionFormat.NONE, "")
    return [
        Connection(cid, topic, msgtype, definitions.get(msgtype, none), digest or "", 0,
                   ConnectionExtRosbag2(fmt, parse_qos(qos or [])), owner)
        for cid, topic, msgtype, fmt, qos, digest in db.execute(f"SELECT {query} FROM topics ORDER BY id")  # noqa: S608
    ]
