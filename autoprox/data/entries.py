"""The format of one statistics cache entry: a NumPy ``.npz`` archive of each block's
tensors (float16 times a power-of-two scale, or float32) and a metadata record, written
by :func:`encode_entry` and read and checked by :func:`decode_entry` (optionally as views
of a memory map, :class:`MappedArchive`, kept encoded per block, :class:`EncodedBlock`).
:mod:`autoprox.data.cache` keys, stores and computes entries.
"""

from __future__ import annotations

import collections.abc
import io
import json
import math
import mmap
import os
import struct
import sys
import zipfile
import zlib
from pathlib import Path
from typing import IO, TYPE_CHECKING, Mapping, Sequence

import numpy as np

from autoprox.core.errors import CacheError
from autoprox.data.extras import EXTRA_SETS
from autoprox.networks.statistics import STAT_NAMES, BlockStats

if TYPE_CHECKING:
    import torch

#: Bump when the statistics code changes: it is part of every entry's key and metadata.
STATS_VERSION = "stats-v1"
PRECISIONS = ("float16", "float32")
FLOAT16_TOP_EXPONENT = 14  # largest magnitude maps into [2^14, 2^15), below float16's 65504

#: The signature of a zip member's local header.
ZIP_LOCAL_HEADER = b"PK\x03\x04"
#: How a ``.npz`` entry starts: a zip file's local header (or an empty zip's end record).
ZIP_MAGIC = (ZIP_LOCAL_HEADER, b"PK\x05\x06")


class CacheCorrupt(CacheError, ValueError):
    """A cache entry that cannot be trusted."""


def check_zip_start(handle: IO[bytes]) -> None:
    """CacheCorrupt unless the file ``handle`` reads (from its start) starts as a zip file does; leaves it at
    its start again."""
    if handle.read(4) not in ZIP_MAGIC:
        raise CacheCorrupt("not a NumPy .npz archive: it does not start as a zip file does")
    handle.seek(0)


def encode_array(tensor: torch.Tensor, precision: str) -> tuple[np.ndarray, int]:
    """A tensor as the array an entry stores and its scale exponent.

    ``"float32"`` keeps the values (exponent 0); ``"float16"`` scales them by a power of
    two so the largest magnitude sits near float16's top, then rounds to float16.
    :func:`decode_array` undoes the scaling.
    """
    array = tensor.detach().cpu().numpy().astype(np.float32, copy=False)
    if precision == "float32":
        return array, 0
    peak = float(np.max(np.abs(array))) if array.size else 0.0
    if peak == 0.0 or not math.isfinite(peak):
        return array.astype(np.float16), 0
    exponent = math.floor(math.log2(peak)) - FLOAT16_TOP_EXPONENT
    return np.ldexp(array, -exponent).astype(np.float16), exponent


def decode_array_numpy(array: np.ndarray, exponent: int) -> np.ndarray:
    """The reference decoding: float32, then scaled by 2**exponent with ``np.ldexp``."""
    values = array.astype(np.float32)
    if exponent:
        np.ldexp(values, exponent, out=values)  # the float32 loop, in place
    return values


def decode_array(array: np.ndarray, exponent: int) -> torch.Tensor:
    """A stored array as a fresh float32 tensor, bitwise equal to :func:`decode_array_numpy`'s.

    With a scale 2**exponent that is a normal float32, the conversion (exact: every
    float16 is a float32) and the multiplication (one correctly rounded product, as
    ``ldexp``'s) run in torch, about ten times faster than NumPy's; other cases take
    the reference path.
    """
    import torch  # here, not at the top: the table commands read this module without torch

    if exponent and -126 <= exponent <= 127 and array.dtype == np.float16:
        return torch.from_numpy(array).to(torch.float32).mul_(2.0 ** exponent)
    return torch.from_numpy(decode_array_numpy(array, exponent))


class EncodedBlock(collections.abc.Mapping):
    """One block's statistics kept as stored (float16 and a power-of-two scale, or float32).

    Reading a statistic decodes it with :func:`decode_array`, the function a float32 load uses,
    so the tensor is the very one :meth:`StatisticsCache.load` returns, to the last bit,
    at half the resident memory for float16 entries. Decoded tensors are not kept.
    """

    __slots__ = ("_arrays",)

    def __init__(self, arrays: Mapping[str, tuple[np.ndarray, int]]) -> None:
        self._arrays = dict(arrays)

    def __getitem__(self, name: str) -> torch.Tensor:
        array, exponent = self._arrays[name]
        return decode_array(array, exponent)

    def __iter__(self):
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def stored(self, name: str) -> tuple[np.ndarray, int] | None:
        """A statistic as stored: its array (float16 or float32) and its power-of-two exponent; None if absent."""
        return self._arrays.get(name)

    def shape(self, name: str) -> tuple[int, ...]:
        """A statistic's shape, without decoding it."""
        return tuple(self._arrays[name][0].shape)

    @property
    def nbytes(self) -> int:
        """Bytes held (the encoded arrays)."""
        return sum(array.nbytes for array, _ in self._arrays.values())

    def merged(self, other: "EncodedBlock") -> "EncodedBlock":
        """This block's statistics and ``other``'s together."""
        return EncodedBlock({**self._arrays, **other._arrays})


def merge_blocks(main: Sequence[BlockStats], *extras: Sequence[BlockStats]) -> list[BlockStats]:
    """Blocks holding the statistics of ``main`` and of each of ``extras`` (the same blocks);
    ``main`` itself without extras."""
    if not extras:
        return main
    merged = list(main)
    for extra in extras:
        if len(extra) != len(merged):
            raise CacheCorrupt(f"an extra entry holds {len(extra)} blocks, the statistics {len(merged)}")
        merged = [a.merged(b) if isinstance(a, EncodedBlock) and isinstance(b, EncodedBlock) else {**a, **b}
                  for a, b in zip(merged, extra)]
    return merged


def encode_entry(stats: Sequence[BlockStats], key: str, precision: str, extra: str | None = None) -> bytes:
    """Serialise statistics into ``.npz`` bytes (no pickle anywhere): the eight, or with ``extra``
    that extra set's statistics (its name then in the metadata)."""
    arrays: dict[str, np.ndarray] = {}
    exponents: dict[str, int] = {}
    for index, block in enumerate(stats):
        for name in _entry_names(extra):
            label = f"b{index}_{name}"
            arrays[label], exponents[label] = encode_array(block[name], precision)
    meta = {
        "key": key,
        "version": STATS_VERSION,
        "precision": precision,
        "blocks": len(stats),
        "exponents": exponents,
        "shapes": {label: list(a.shape) for label, a in arrays.items()},
    }
    if extra is not None:
        meta["extra"] = extra
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


#: Whether a mapped entry's pages, once checked, can be given back (Linux: a private file mapping's unwritten
#: pages are refilled from the file; elsewhere the advice may mean something else, so it is not given).
_DROP_READ_PAGES = sys.platform.startswith("linux") and hasattr(mmap, "MADV_DONTNEED")


class MappedArchive:
    """The arrays of an uncompressed ``.npz`` entry as read-only views of one memory map.

    Nothing is read into this process's memory: pages come from the page cache when a
    statistic is decoded (and the kernel may drop them again). Each member's zip CRC is
    checked once, when the archive is opened, as :func:`numpy.load` checks it on reading.
    """

    def __init__(self, path: Path) -> None:
        self._arrays: dict[str, np.ndarray] = {}
        with open(path, "rb") as handle:
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
            with zipfile.ZipFile(self._map) as archive:  # a bad offset is a ValueError, not the file's OSError
                members = archive.infolist()
            view = memoryview(self._map)
            for info in members:
                if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".npy"):
                    raise CacheCorrupt(f"member {info.filename} is not a stored .npy array")
                header = bytes(view[info.header_offset:info.header_offset + 30])
                if header[:4] != ZIP_LOCAL_HEADER:
                    raise CacheCorrupt(f"member {info.filename} has no local header")
                name_length, extra_length = struct.unpack("<HH", header[26:30])
                start = info.header_offset + 30 + name_length + extra_length
                member = view[start:start + info.compress_size]
                if len(member) != info.compress_size or zlib.crc32(member) != info.CRC:
                    raise CacheCorrupt(f"bad CRC-32 for member {info.filename}")
                stream = io.BytesIO(bytes(member[:256]))
                version = np.lib.format.read_magic(stream)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = read_header(stream)
                if dtype.hasobject or fortran:
                    raise CacheCorrupt(f"member {info.filename} is not a plain C-ordered array")
                count = int(np.prod(shape))
                array = np.frombuffer(self._map, dtype=dtype, count=count, offset=start + stream.tell())
                self._arrays[info.filename[:-4]] = array.reshape(shape)
        if _DROP_READ_PAGES:
            # The CRC check read every page: let them go from this process (they stay in the page cache,
            # refilled from the unchanged file when a statistic is decoded), so that holding many entries
            # mapped costs resident memory only for what is read.
            self._map.madvise(mmap.MADV_DONTNEED)

    def __getitem__(self, label: str) -> np.ndarray:
        return self._arrays[label]

    def __enter__(self) -> "MappedArchive":
        return self

    def __exit__(self, *exc_info) -> None:
        pass  # the arrays keep the map alive; it closes when the last of them goes


#: What reading a damaged entry raises (zip, zlib, the ``.npy`` header and the metadata
#: record fail in these ways: ``BadZipFile``, ValueError (``JSONDecodeError``, NumPy's
#: header checks, a seek out of range), KeyError (a missing member), NotImplementedError
#: (a flipped compression or version field), RuntimeError (a flipped "encrypted" flag). Only these mark an entry corrupt
#: (and so deleted); anything else, a TypeError of a bug for one, propagates.
DAMAGED_ENTRY_ERRORS = (zipfile.BadZipFile, ValueError, KeyError, EOFError, NotImplementedError, RuntimeError,
                        OverflowError, zlib.error, struct.error)


def _corrupt(error: Exception) -> CacheCorrupt:
    """What parsing a damaged entry raised (one of :data:`DAMAGED_ENTRY_ERRORS`), as a :class:`CacheCorrupt`."""
    text = str(error).splitlines()[0] if str(error) else ""
    if "allow_pickle" in text:  # NumPy's advice to unpickle; the cache never holds pickles
        text = "it holds pickled objects, which the cache never writes"
    return CacheCorrupt(f"{type(error).__name__}: {text}"[:200])


def check_entry(path: Path, key: str, extra: str | None = None) -> None:
    """Check an entry cheaply, without reading its arrays; raise :class:`CacheCorrupt` naming what is wrong.

    Reads the zip directory and the metadata record only: the metadata must match ``key``
    (as :func:`decode_entry` checks it) and every array it lists must be a stored member,
    lying within the file, of the size its shape and the entry's precision give. A
    truncated file, one of another format or one missing arrays fails; the arrays' CRCs
    are checked when the entry is read. An OSError reading the file propagates as such.
    """
    with open(path, "rb") as handle:
        check_zip_start(handle)
        size = os.fstat(handle.fileno()).st_size
        try:
            with zipfile.ZipFile(handle) as archive:
                members = {info.filename: info for info in archive.infolist()}
                for info in members.values():
                    if info.compress_type != zipfile.ZIP_STORED:
                        raise CacheCorrupt(f"member {info.filename} is not stored")
                    if info.header_offset + 30 + len(info.filename) + info.compress_size > size:
                        raise CacheCorrupt(f"member {info.filename} runs past the end of the file")
                with archive.open("meta.npy") as member:
                    meta = json.loads(bytes(np.lib.format.read_array(member, allow_pickle=False)).decode())
        except CacheCorrupt:
            raise
        except DAMAGED_ENTRY_ERRORS as exc:
            raise _corrupt(exc) from None
    blocks, shapes, exponents = _checked_meta(meta, key, extra)
    if meta.get("precision") not in PRECISIONS:
        raise CacheCorrupt("metadata lacks its precision")
    item_size = np.dtype(meta["precision"]).itemsize
    for index in range(blocks):
        for name in _entry_names(extra):
            label = f"b{index}_{name}"
            info, shape = members.get(f"{label}.npy"), shapes.get(label)
            if info is None:
                raise CacheCorrupt(f"{label} is missing")
            if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
                raise CacheCorrupt(f"{label} has no shape in the metadata")
            if not isinstance(exponents.get(label), int):
                raise CacheCorrupt(f"{label} has no scale exponent")
            header = info.file_size - math.prod(shape) * item_size  # .npy headers are padded to 16 bytes
            if header < 16 or header % 16 or header > 65536:
                raise CacheCorrupt(f"{label} does not hold the {shape} array the metadata gives")
    if not blocks:
        raise CacheCorrupt("entry holds no blocks")


def _entry_names(extra: str | None) -> tuple[str, ...]:
    return STAT_NAMES if extra is None else EXTRA_SETS[extra].stat_names


def decode_entry(source: Path | bytes, key: str, encoded: bool = False, mapped: bool = False,
                 extra: str | None = None) -> list[BlockStats]:
    """Read and check an entry (a file, or its bytes); raise :class:`CacheCorrupt` naming what is wrong.

    ``encoded``: keep each block as stored (an :class:`EncodedBlock`, decoded per read)
    instead of float32 tensors. ``mapped`` (with ``encoded``, for a file): the stored
    arrays are views of a memory map of the file (:class:`MappedArchive`), not copies.
    ``extra``: the entry is that extra set's (:data:`EXTRA_SETS`).

    Only parsing the entry is guarded (:data:`DAMAGED_ENTRY_ERRORS` become
    :class:`CacheCorrupt`); an OSError reading the file propagates as such, and decoding
    the arrays runs outside the guard, so an error there is a bug and propagates instead
    of having a good entry deleted.
    """
    try:
        if mapped and encoded and not isinstance(source, bytes):
            with MappedArchive(source) as archive:
                stored = _read_archive(archive, key, extra)
        else:
            # Read whole first: the file's own errors (OSError) stay apart from the format's.
            with io.BytesIO(source if isinstance(source, bytes) else Path(source).read_bytes()) as handle:
                check_zip_start(handle)
                with np.load(handle, allow_pickle=False) as archive:
                    stored = _read_archive(archive, key, extra)
    except CacheCorrupt:
        raise
    except DAMAGED_ENTRY_ERRORS as exc:
        raise _corrupt(exc) from None
    if not stored:
        raise CacheCorrupt("entry holds no blocks")
    if encoded:
        return [EncodedBlock(arrays) for arrays in stored]
    return [{name: decode_array(*pair) for name, pair in arrays.items()} for arrays in stored]


def _checked_meta(meta, key: str, extra: str | None) -> tuple[int, dict, dict]:
    """(block count, shapes, exponents) of an entry's metadata record, checked against ``key`` and ``extra``."""
    if not isinstance(meta, dict) or meta.get("key") != key or meta.get("version") != STATS_VERSION \
            or meta.get("extra") != extra:
        raise CacheCorrupt("metadata does not match its key")
    blocks, shapes, exponents = meta.get("blocks"), meta.get("shapes"), meta.get("exponents")
    if not isinstance(blocks, int) or not isinstance(shapes, dict) or not isinstance(exponents, dict):
        raise CacheCorrupt("metadata lacks its block count, shapes or exponents")
    return blocks, shapes, exponents


def _read_archive(archive, key: str, extra: str | None = None) -> list[dict[str, tuple[np.ndarray, int]]]:
    """Each block's stored arrays and scale exponents, checked against the metadata record."""
    blocks, shapes, exponents = _checked_meta(json.loads(bytes(archive["meta"]).decode()), key, extra)
    stored = []
    for index in range(blocks):
        arrays = {}
        for name in _entry_names(extra):
            label = f"b{index}_{name}"
            array, exponent = archive[label], exponents.get(label)
            if list(array.shape) != shapes.get(label):
                raise CacheCorrupt(f"{label} has shape {list(array.shape)}")
            if not isinstance(exponent, int):
                raise CacheCorrupt(f"{label} has no scale exponent")
            arrays[name] = (array, exponent)
        stored.append(arrays)
    return stored


__all__ = ["DAMAGED_ENTRY_ERRORS", "PRECISIONS", "STATS_VERSION", "ZIP_LOCAL_HEADER", "ZIP_MAGIC", "CacheCorrupt",
           "EncodedBlock", "MappedArchive", "check_entry", "check_zip_start", "decode_array", "decode_array_numpy", "decode_entry", "encode_array", "encode_entry",
           "merge_blocks"]
