"""Segment encoding: consecutive messages of one partition as Arrow IPC.

A segment holds rows in ``STORED_SCHEMA`` order; it does not store offsets,
which are ``base_offset + row index`` and assigned only when the index row
that makes the segment visible is committed. That is what lets executors
stage segments before knowing their offsets.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from sparkfn.topics.message import STORED_SCHEMA

# Segments whose encoding is at most this many bytes live inline in the index row.
INLINE_LIMIT = 64 * 1024
# Segment files compress their buffers when the values compress well (Arrow
# IPC buffer compression, which every reader undoes by itself): writing a file
# costs more than compressing it. 250k messages of JSON text: 32 MB, 54 ms to
# write and fsync; 5.5 MB and 21 ms with LZ4, read back in 3 ms. Values that
# do not compress (random, encrypted, already compressed) are left as they
# are: LZ4 gains nothing on them and reading 1M of them back took twice as
# long (a memory map is read in place). Inline segments stay as they are:
# small, and already in the index row.
FILE_COMPRESSION = "lz4"
COMPRESSION_SAMPLE_BYTES = 64 * 1024
COMPRESSION_MAX_RATIO = 0.6  # compress when a sample of the values shrinks to this


Codec = str | None
"""A segment's compression: ``lz4``, ``zstd``, ``None`` (none) or ``auto``
(:func:`file_compression` decides)."""


def file_compression(table: pa.Table) -> str | None:
    """:data:`FILE_COMPRESSION` if a sample of ``table``'s values compresses well, else None."""
    values = table.column("value")
    if values.num_chunks == 0:
        return None
    chunk = values.chunk(0)
    _, offsets, data = chunk.buffers()
    if data is None:
        return None
    # A slice's values start where its first offset points (STORED_SCHEMA: int32 offsets).
    start = int(np.frombuffer(offsets, dtype=np.int32, count=chunk.offset + 1)[chunk.offset])
    sample = data.slice(start, min(COMPRESSION_SAMPLE_BYTES, data.size - start))
    if sample.size == 0:
        return None
    packed = pa.compress(sample, codec=FILE_COMPRESSION, asbytes=True)
    return FILE_COMPRESSION if len(packed) <= COMPRESSION_MAX_RATIO * sample.size else None


def encode(table: pa.Table, compression: Codec = None) -> bytes:
    """Arrow IPC stream bytes of ``table`` (already in ``STORED_SCHEMA``), its buffers
    compressed with ``compression`` (``auto``: none, small segments do not gain)."""
    sink = pa.BufferOutputStream()
    codec = None if compression == "auto" else compression
    options = pa.ipc.IpcWriteOptions(compression=codec)
    with pa.ipc.new_stream(sink, STORED_SCHEMA, options=options) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def fits_inline(table: pa.Table, nbytes: int | None = None) -> bool:
    """Whether ``table`` may encode small enough to be inlined (its buffers are the bulk);
    ``nbytes``: its ``table.nbytes``, if the caller counted it already."""
    size: int = table.nbytes if nbytes is None else nbytes
    return size <= INLINE_LIMIT


def decode(data: bytes | pa.Buffer) -> pa.Table:
    """Inverse of :func:`encode`."""
    return pa.ipc.open_stream(data).read_all()


def new_location(topic_key: str, partition: int) -> str:
    """A fresh, unique location (relative to the data dir) for a segment file."""
    return f"segments/{topic_key}/{partition}/{uuid.uuid4().hex}.arrow"


@contextmanager
def _durable(data_dir: Path, location: str, native: bool = False) -> Iterator[BinaryIO]:
    """A new segment file's handle, written to a temp name; fsynced and renamed on success.

    A crash leaves at worst an unreferenced file, never a partial one under
    a referenced name; a failed write (a full disk, say) removes its temp
    file, so that what it took is free again. ``native``: an Arrow ``OSFile``
    (Arrow writes it without the interpreter lock) instead of a Python file.
    """
    path = data_dir / location
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    try:
        handle: BinaryIO = pa.OSFile(str(tmp), mode="w") if native else open(tmp, "wb")  # noqa: SIM115
        try:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        finally:
            handle.close()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def write_file(data_dir: Path, location: str, data: bytes) -> None:
    """Write a segment file durably: to a temp name, fsync, then rename."""
    with _durable(data_dir, location) as handle:
        handle.write(data)


def write_table_file(
    data_dir: Path, location: str, table: pa.Table, compression: Codec = "auto"
) -> int:
    """Encode ``table`` straight into a segment file, durably as :func:`write_file`; its size.

    The size returned is the data's uncompressed size (at least the file's):
    the index's ``size_bytes``, which batch caps, retention and compaction
    count, means the same for compressed files and inline segments.

    The IPC stream goes to the file as it is written, its buffers compressed
    when the values compress (:func:`file_compression`): no copy of the
    whole segment in memory, which :func:`encode` makes twice (a growing
    buffer, then ``bytes``). The file is Arrow's own (``OSFile``), so the
    encoding, compression and writes run without the interpreter lock: a
    Python file made Arrow take the lock back for every buffer it wrote,
    and a source's append then waited on the thread reading its broker
    (docs/connectors.md).
    """
    codec = file_compression(table) if compression == "auto" else compression
    options = pa.ipc.IpcWriteOptions(compression=codec)
    with _durable(data_dir, location, native=True) as handle:
        with pa.ipc.new_stream(handle, STORED_SCHEMA, options=options) as writer:
            writer.write_table(table)
        size: int = max(handle.tell(), table.nbytes)
    return size


def read_file(data_dir: Path, location: str) -> pa.Table:
    """Read a segment file (memory-mapped)."""
    with pa.memory_map(str(data_dir / location)) as source:
        return pa.ipc.open_stream(source).read_all()
