"""A rosbag2 MCAP writer that takes a whole block of messages at once.

rosbags' `Writer.write` costs about 10 us per message in Python (a BytesIO record, eight
`int.to_bytes` calls, and two more per message for the chunk's message index): 30 us for a
sample's three output messages, most of the replay's 50 us budget. `BlockWriter` keeps rosbags'
writer (file header, schemas, channels, summary, footer, metadata.yaml) and only replaces
the per-message parts: `message_records` builds the MCAP Message records of one channel's
block with numpy, and `BlockMcapStorage` appends them to the open chunk and writes the
chunk's message indexes from arrays.

MCAP Message record: opcode 0x05, uint64 record length, then uint16 channel id, uint32
sequence, uint64 log time, uint64 publish time, and the serialized message.
"""

from __future__ import annotations

from collections import defaultdict
from io import BytesIO
from typing import TYPE_CHECKING

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.storage_mcap import (
    McapWriter,
    PendingChunk,
    write_record,
    write_string,
    write_uint16,
    write_uint32,
    write_uint64,
)

if TYPE_CHECKING:
    from pathlib import Path

    from numpy.typing import NDArray
    from rosbags.interfaces import Connection

MESSAGE_OPCODE = 0x05
MESSAGE_HEADER = 1 + 8 + 2 + 4 + 8 + 8  # opcode, length, channel, sequence, log and publish time
CHUNK_SIZE = 2**20  # close a chunk once it holds this many bytes, as rosbags does


def message_records(channel_id: int, log_times: NDArray[np.int64], payloads: NDArray[np.uint8]) -> NDArray[np.uint8]:
    """(N, MESSAGE_HEADER + size) Message records for (N,) log times and (N, size) payloads.

    The publish time equals the log time, and the sequence is 0, as rosbags writes them.
    """
    n, size = payloads.shape
    records = np.empty((n, MESSAGE_HEADER + size), dtype=np.uint8)
    records[:, 0] = MESSAGE_OPCODE
    records[:, 1:9] = np.array([MESSAGE_HEADER - 9 + size], dtype="<u8").view(np.uint8)
    records[:, 9:11] = np.array([channel_id], dtype="<u2").view(np.uint8)
    records[:, 11:15] = 0
    times = np.ascontiguousarray(log_times, dtype="<u8").view(np.uint8).reshape(n, 8)
    records[:, 15:23] = times
    records[:, 23:31] = times
    records[:, 31:] = payloads
    return records


class BlockMcapStorage(McapWriter):
    """rosbags' MCAP storage plus `write_block`. The open chunk's message index holds, per
    channel, arrays of log times and offsets instead of one tuple per message."""

    def write(self, connection: Connection, timestamp: int, data: bytes | memoryview) -> None:
        self.write_block(connection.id, np.array([timestamp]), np.frombuffer(data, dtype=np.uint8)[None, :])

    def write_block(self, channel_id: int, log_times: NDArray[np.int64], payloads: NDArray[np.uint8]) -> None:
        """Appends one channel's messages, (N, size) `payloads` logged at `log_times`, to
        the open chunk. Several channels' blocks in a row leave the chunk in channel order
        rather than time order; MCAP allows that, and readers order messages by log time
        (rosbags and rosbag2 both do, keeping the file order among equal times)."""
        records = message_records(channel_id, log_times, payloads)
        chunk = self.chunk
        start, end = int(log_times.min()), int(log_times.max())
        self.message_start_time = min(start, self.message_start_time)
        self.message_end_time = max(end, self.message_end_time)
        chunk.message_start_time = min(start, chunk.message_start_time)
        chunk.message_end_time = max(end, chunk.message_end_time)
        offsets = chunk.bio.tell() + records.shape[1] * np.arange(len(records), dtype=np.int64)
        chunk.bio.write(records.tobytes())
        self.channel_stats[channel_id] += len(records)
        self._index.setdefault(channel_id, []).append((np.asarray(log_times, dtype=np.int64), offsets))
        if chunk.bio.tell() > CHUNK_SIZE:
            self.close_chunk()

    @property
    def _index(self) -> dict[int, list[tuple[NDArray[np.int64], NDArray[np.int64]]]]:
        """The open chunk's message index by channel (rosbags' `msgs` field, as arrays)."""
        return self.chunk.msgs  # type: ignore[return-value]

    def close_chunk(self) -> None:
        """As rosbags' `close_chunk`, with the message indexes written from arrays."""
        chunk = self.chunk
        data = chunk.bio.getvalue()
        rec = BytesIO()
        write_uint64(rec, chunk.message_start_time)
        write_uint64(rec, chunk.message_end_time)
        write_uint64(rec, len(data))
        write_uint32(rec, 0)  # no CRC, as rosbags
        compressed = self.compressor(data)
        write_string(rec, self.compression)
        write_uint64(rec, len(compressed))
        rec.write(compressed)
        chunk_start = self.bio.tell()
        write_record(self.bio, 0x06, rec)
        chunk_end = self.bio.tell()

        index_offsets: list[tuple[int, int]] = []
        for cid, parts in self._index.items():
            index_offsets.append((cid, self.bio.tell()))
            times = np.concatenate([t for t, _ in parts])
            offsets = np.concatenate([o for _, o in parts])
            # Index in log-time order (blocks of several frame ids may interleave in time).
            order = np.argsort(times, kind="stable")
            pairs = np.stack([times[order], offsets[order]], axis=1).astype("<u8")
            rec = BytesIO()
            write_uint16(rec, cid)
            write_uint32(rec, pairs.nbytes)
            rec.write(pairs.tobytes())
            write_record(self.bio, 0x07, rec)

        rec = BytesIO()
        write_uint64(rec, chunk.message_start_time)
        write_uint64(rec, chunk.message_end_time)
        write_uint64(rec, chunk_start)
        write_uint64(rec, chunk_end - chunk_start)
        write_uint32(rec, len(index_offsets) * 10)
        for cid, offset in index_offsets:
            write_uint16(rec, cid)
            write_uint64(rec, offset)
        write_uint64(rec, self.bio.tell() - chunk_end)
        write_string(rec, self.compression)
        write_uint64(rec, len(compressed))
        write_uint64(rec, len(data))
        self.chunks.append(rec)
        self.chunk = PendingChunk(2**63 - 1, 0, BytesIO(), defaultdict(list))


class BlockWriter(Writer):
    """rosbags' rosbag2 `Writer`, MCAP only, plus `write_block`."""

    STORAGE_PLUGINS = {StoragePlugin.MCAP: BlockMcapStorage}  # type: ignore[dict-item]  # noqa: RUF012

    def __init__(self, path: Path) -> None:
        super().__init__(path, version=9, storage_plugin=StoragePlugin.MCAP)

    def write_block(self, connection: Connection, log_times: NDArray[np.int64], payloads: NDArray[np.uint8]) -> None:
        """One connection's messages: (N, size) serialized `payloads` logged at `log_times`."""
        if not len(log_times):
            return
        assert isinstance(self.storage, BlockMcapStorage), "open() the writer first"
        self.storage.write_block(connection.id, log_times, payloads)
        self.counts[connection.id] += len(log_times)
        self.min_timestamp = min(int(log_times.min()), self.min_timestamp)
        self.max_timestamp = max(int(log_times.max()), self.max_timestamp)
