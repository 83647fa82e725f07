"""What a damaged bag file gave and what it lost, as the replay reports it (summary.json's
"salvage" section, a warning line)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pathlib import Path

    from .blocks import OnDamage

LISTED = 20  # damaged regions listed one by one; all are counted


class Damage(NamedTuple):
    """An unreadable region: `size` bytes at file offset `offset` (for damage inside a compressed
    chunk, the chunk's offset and bytes of its decompressed data)."""

    offset: int
    size: int
    reason: str


@dataclass
class Salvage:
    """The account of one damaged storage file.

    recovered: messages read, by topic; expected: what the file held by topic, when the file
    or its metadata.yaml says; lost_at_least: messages known to be lost even when `expected`
    is unknown (a record seen but unreadable, a row id missing); missing_bytes: bytes known to
    be cut off the end (the rest of a chunk the file ends in, the size a header states); cause:
    why it had to be salvaged.
    """

    path: Path
    format: str
    cause: str = ""
    recovered: Counter[str] = field(default_factory=Counter)
    expected: dict[str, int] | None = None
    lost_at_least: int = 0
    missing_bytes: int | None = None
    damage: dict[int, Damage] = field(default_factory=dict)

    def cut_off(self, size: int) -> None:
        """At least `size` bytes are missing from the end (several clues: the largest counts)."""
        if size > 0:
            self.missing_bytes = max(self.missing_bytes or 0, size)

    def note(self, offset: int, size: int, reason: str, messages: int = 0) -> None:
        """Records a damaged region once, however often a reader walks past it; `messages`:
        how many messages it is known to have held (a message record's header was seen)."""
        if offset not in self.damage:
            self.damage[offset] = Damage(offset, size, reason)
            self.lost_at_least += messages

    def at(self, base: int, where: str = "") -> OnDamage:
        """A walk's damage callback: its offsets count from `base`; `where` ends each reason."""
        def note(pos: int, size: int, reason: str, messages: int) -> None:
            self.note(base + pos, size, reason + where, messages)
        return note

    def lost(self) -> dict[str, int] | None:
        """Messages lost by topic, when the file says how many it held."""
        if self.expected is None:
            return None
        return {t: max(0, n - self.recovered[t]) for t, n in self.expected.items()}

    def as_dict(self) -> dict[str, Any]:
        lost = self.lost()
        topics = sorted(set(self.recovered) | set(self.expected or {}))
        regions = sorted(self.damage.values())
        return {
            "bag": str(self.path),
            "format": self.format,
            "reason": self.cause,
            "messages_recovered": sum(self.recovered.values()),
            "messages_lost": None if lost is None else max(sum(lost.values()), self.lost_at_least),
            "messages_lost_at_least": max(self.lost_at_least, sum((lost or {}).values())),
            "bytes_skipped": sum(d.size for d in regions),
            "bytes_missing": self.missing_bytes,
            "topics": {t: {"recovered": self.recovered[t], "lost": None if lost is None else lost.get(t, 0)}
                       for t in topics},
            "damaged_regions": len(regions),
            "damage": [d._asdict() for d in regions[:LISTED]],
        }

    def describe(self) -> str:
        """One line for the console: what was saved, what was lost, where."""
        s = self.as_dict()
        if s["messages_lost"] is not None:
            lost = f"{s['messages_lost']} lost"
        else:
            lost = f"at least {s['messages_lost_at_least']} lost (the file does not say how many it held)"
        missing = f", {s['bytes_missing']} bytes cut off the end" if s["bytes_missing"] else ""
        regions = sorted(self.damage.values())
        first = f"; first: {regions[0].reason} at byte {regions[0].offset}" if regions else ""
        return (f"{self.path}: damaged {self.format} file ({self.cause}) salvaged: {s['messages_recovered']} "
                f"intact messages read, {lost}; {s['bytes_skipped']} bytes unreadable in {s['damaged_regions']} "
                f"region(s){missing}{first}")
