"""Proxy tables: labelled spaces given as published proxy values, with no networks to build.

A proxy table is a CSV file (optionally gzip-compressed, ``.csv.gz``)::

    id,val_acc,params,flops,snip,nwot
    "(4, 0, 3, 1, 4, 3)",84.99,0.129306,19.248832,22.923,754.684
    ...

* the first column is ``id``: text naming the architecture, each id once;
* then the **accuracy columns** (any name; each is a target, called by its column name:
  ``--targets val_acc``);
* then the **proxy columns**: they start at the first column named as one of
  :data:`STANDARD_PROXIES` (the 13 of NAS-Bench-Suite-Zero, as the zoo names them), and
  every column from there on is a proxy column, so a table may carry proxies of its own
  after the standard ones.

A line whose first character other than a space is ``#`` is a comment, and a blank line is skipped, as the ViT CSV
reader (:mod:`autoprox.data.tables`) reads them; an id that starts with ``#`` is written quoted. A comment after the
header is said in the table's ``notes`` (it may be a row commented out, or an id starting with ``#`` unquoted).

Every cell is a number or empty (not measured: NaN); the usual spellings of a missing value
(:data:`MISSING_SPELLINGS`: ``nan``, ``NA``, ``N/A``, ``null``, ``None``, ..., any case) read as empty too. An
infinite proxy value (``inf``, ``-inf``, ``Infinity``: a proxy that overflowed) ranks beyond every finite value of
its column, all of one sign tied (:func:`order_infinities`), and the table says so in its ``notes``. What is
refused, each in one line naming the file and the line or column: no ``id`` column first, an id given twice, a cell
that is not a number, an infinite target, no column named as a standard proxy (so no proxy column), a proxy column
with no finite value at all, a file larger than
:data:`MAX_TABLE_BYTES`, fewer than :data:`MIN_ROWS` rows, a column named twice (header cells are
compared with the spaces around them dropped; the error names both cells as written). No accuracy column, or
one with no value, is refused too, except by a reader that needs no labels (``score``:
``read_proxy_table(..., labels=False)``).

A **table space** (:class:`TableSpace`) is one space measured on one or more datasets:
NAS-Bench-201 is one space of cells with a table for CIFAR-10 and one for ImageNet16-120,
each with its own proxy values. The packaged table spaces are listed by
:func:`table_space_names`; their files and licences lie in ``autoprox/resources/proxy-tables``.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from autoprox.core.errors import BenchmarkError
from autoprox.core.numbers import cell_number
from autoprox.core.resources import resource_dir

__all__ = ["BINARY_KINDS", "MAX_TABLE_BYTES", "MAX_TARGET_MAGNITUDE", "MIN_ROWS", "MISSING_SPELLINGS", "PROGRESS_BYTES",
           "PROXY_TABLE_FOLDER", "STANDARD_PROXIES", "ProxyTable", "TableSpace",
           "binary_kind", "first_line", "is_proxy_table", "load_table_space", "order_infinities", "read_proxy_table",
           "table_space_files", "table_space_names", "table_space_summary"]

#: The 13 proxies of NAS-Bench-Suite-Zero (Krishnakumar et al., NeurIPS 2022), named as the zoo
#: and the published tables name them. ``params`` and ``flops`` describe size.
STANDARD_PROXIES: tuple[str, ...] = ("params", "flops", "snip", "grasp", "synflow", "grad_norm", "fisher",
                                     "plain", "nwot", "jacov", "l2_norm", "zen", "epe_nas")

#: Largest table read (bytes, after decompression): a bigger file is refused before it is parsed.
MAX_TABLE_BYTES = 256 * 1024 * 1024

#: Fewest rows a table must have: Kendall's tau of two rows ranks nothing.
MIN_ROWS = 3

#: Largest magnitude a target cell may hold: an accuracy, a negated loss or any other score to rank by is accepted,
#: a value past this (``1e300``) is a typo or a unit error and refused.
MAX_TARGET_MAGNITUDE = 1e12

#: Folder of the packaged proxy tables (``autoprox/resources/proxy-tables``).
PROXY_TABLE_FOLDER = "proxy-tables"

ID_COLUMN = "id"

#: Cells read as empty (not measured), compared without case: the spellings of a missing value that
#: spreadsheets, pandas (its default ``na_values``), R and Python's ``str(float("nan"))`` write.
MISSING_SPELLINGS = frozenset({"nan", "-nan", "na", "n/a", "#n/a", "#na", "null", "none", "<na>"})


#: The first bytes of the files most often given for a CSV one that are not UTF-8 text, and what to do instead.
BINARY_KINDS = {b"\x1f\x8b": "gzip-compressed, not CSV text: decompress it (a proxy table may also be named .csv.gz)",
                b"PK\x03\x04": "a zip archive (a spreadsheet's .xlsx?), not CSV text: save the sheet as CSV",
                b"\xff\xfe": "UTF-16 text (a spreadsheet's 'Unicode text'?), not UTF-8: save it as CSV UTF-8",
                b"\xfe\xff": "UTF-16 text (a spreadsheet's 'Unicode text'?), not UTF-8: save it as CSV UTF-8"}


def binary_kind(path: Path) -> str:
    """What :data:`BINARY_KINDS` says of ``path`` when it starts as one of them, else ``""``."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError:
        return ""
    return next((kind for magic, kind in BINARY_KINDS.items() if head.startswith(magic)), "")


@dataclass(frozen=True)
class ProxyTable:
    """One dataset's table: architecture ids, accuracy targets and proxy values.

    Attributes
    ----------
    name : str
        What the table is called in reports (its file stem, or the packaged name).
    ids : tuple of str
        The architectures, in file order.
    accuracies : dict of str to ndarray
        Per target (accuracy column), float values aligned with ``ids``; NaN = not measured.
    proxies : dict of str to ndarray
        Per proxy column, float values aligned with ``ids``; NaN = not measured.
    source : str
        The file it was read from.
    sha256 : str
        The file's sha256 (of its bytes as stored).
    notes : tuple of str
        What reading changed that a user should know, one line each (a proxy column's infinite cells).
    """

    name: str
    ids: tuple[str, ...]
    accuracies: dict[str, np.ndarray]
    proxies: dict[str, np.ndarray]
    source: str = ""
    sha256: str = ""
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def targets(self) -> list[str]:
        """The accuracy columns, in file order."""
        return list(self.accuracies)

    def check_targets(self, targets: Sequence[str] | None) -> list[str]:
        """``targets`` checked against the table's accuracy columns (None: all of them).

        Raises
        ------
        BenchmarkError
            A target the table lacks, naming the ones it has.
        """
        if targets is None:
            return self.targets
        unknown = [t for t in targets if t not in self.accuracies]
        if unknown:
            placed = self.misplaced(unknown[0], "target")
            raise BenchmarkError(f"{self.source or self.name}: no accuracy column {unknown[0]!r}; "
                                 + (f"{placed}; " if placed else "")
                                 + f"its accuracy columns are {', '.join(self.targets) or 'none'}")
        return list(targets)

    def misplaced(self, column: str, wanted: str) -> str | None:
        """Why the file's column ``column`` cannot be read as ``wanted`` (``"proxy"`` or ``"target"``): it is a column
        of the other kind, as its place in the header makes it (proxy columns start at the first column named as a
        standard proxy; those before are targets). None when it is of the kind wanted, or the file lacks it."""
        first = next(iter(self.proxies), None)
        where = self.source or self.name
        if wanted == "proxy" and column in self.accuracies:
            start = f"the first column named as a standard proxy ({first})" if first else "none"
            return (f"{column!r} is an accuracy column of {where}: its proxy columns start at {start}, and a column "
                    f"before that is a target; put {column!r} after {first or 'params'} to read it as a proxy column")
        if wanted == "target" and column in self.proxies:
            return (f"{column!r} is a proxy column of {where}: its proxy columns start at {first}, the first column "
                    f"named as a standard proxy, and a target is a column between {ID_COLUMN!r} and it")
        return None

    def measured_problem(self, target: str) -> str | None:
        """Why ``target`` cannot rank this table's rows, or None: it needs :data:`MIN_ROWS` measured (non-empty)
        values that are not all equal. Empty cells (unmeasured rows) are no problem in themselves."""
        values = self.accuracies[target]
        measured = values[np.isfinite(values)]
        name = self.source or self.name
        if len(measured) < MIN_ROWS:
            return (f"{name}: target {target!r} has only {len(measured)} measured value(s); at least {MIN_ROWS} "
                    "are needed to rank architectures")
        if np.ptp(measured) == 0:
            return (f"{name}: target {target!r} has one constant value ({measured[0]:g}) for all {len(measured)} "
                    "measured rows, so it cannot rank them")
        return None

    def subset(self, indices: Sequence[int]) -> "ProxyTable":
        """The table of the rows ``indices`` only."""
        pick = np.asarray(indices, dtype=np.int64)
        return ProxyTable(self.name, tuple(self.ids[i] for i in pick),
                          {k: v[pick] for k, v in self.accuracies.items()},
                          {k: v[pick] for k, v in self.proxies.items()}, self.source, self.sha256, self.notes)


@dataclass(frozen=True)
class TableSpace:
    """A labelled space given as tables: one table per dataset it was measured on.

    ``targets[i]`` are the accuracy columns of ``tables[i]`` that count for the space
    (its per-space figure is the mean Kendall over every (table, target) pair).
    """

    name: str
    tables: tuple[ProxyTable, ...]
    targets: tuple[tuple[str, ...], ...]
    description: str = ""
    notes: Mapping[str, str] = field(default_factory=dict)

    @property
    def pairs(self) -> list[tuple[ProxyTable, str]]:
        """Every (table, target) pair the space is judged on."""
        return [(table, target) for table, names in zip(self.tables, self.targets) for target in names]

    @property
    def proxy_names(self) -> tuple[str, ...]:
        """The proxy columns every table of the space has, in the first table's order."""
        shared = set.intersection(*(set(t.proxies) for t in self.tables))
        return tuple(name for name in self.tables[0].proxies if name in shared)

    def __len__(self) -> int:
        return sum(len(t) for t in self.tables)


# ------------------------------------------------------------------------- reading
#: A table file of at least this many bytes shows its reading's progress (about a million rows of a few columns).
PROGRESS_BYTES = 32 * 1024 * 1024


class _Counted(io.RawIOBase):
    """A binary stream read through while counting its bytes (and hashing them, with ``digest``); refused past
    ``limit`` bytes, in one line naming ``path``."""

    def __init__(self, stream, path: Path, limit: float, digest=None, what: str = "") -> None:
        super().__init__()
        self.stream, self.path, self.limit, self.digest, self.what, self.count = stream, path, limit, digest, what, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.stream.read(len(buffer))
        self.count += len(data)
        if self.count > self.limit:
            raise BenchmarkError(f"{self.path}: more than {self.limit:,} bytes{self.what}, the most a proxy table may have")
        if self.digest is not None:
            self.digest.update(data)
        buffer[:len(data)] = data
        return len(data)


def _open_text(path: Path, limit: int, stack) -> tuple[io.TextIOWrapper, _Counted, "hashlib._Hash", int]:
    """The file's text as a stream (gunzipped for ``.gz``), read once: the stream, the counter of its stored
    bytes, the sha256 of those bytes as they are read, and the file's size. ``stack``: an ExitStack that
    closes the file."""
    try:
        size = path.stat().st_size
        handle = stack.enter_context(open(path, "rb"))
    except OSError as exc:
        raise BenchmarkError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if size > limit:
        raise BenchmarkError(f"{path}: {size:,} bytes, more than the {limit:,} a proxy table may have")
    digest = hashlib.sha256()
    stored = _Counted(handle, path, limit, digest)
    binary = io.BufferedReader(stored, 1 << 20)
    if path.suffix == ".gz":
        binary = io.BufferedReader(_Counted(gzip.GzipFile(fileobj=binary), path, limit, what=" once decompressed"),
                                   1 << 20)
    return io.TextIOWrapper(binary, encoding="utf-8-sig", newline=""), stored, digest, size


def first_line(path: str | os.PathLike) -> str:
    """The first line of a table file (gunzipped for ``.gz``) that is neither a comment nor blank (its header),
    within the file's first 64 KB; empty if unreadable or none."""
    path = Path(path)
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8-sig", newline="") as handle:
            budget = 1 << 16
            while budget > 0:
                line = handle.readline(budget)
                if not line or not (_is_comment(line) or not line.strip()):
                    return line
                budget -= len(line)
            return ""
    except (OSError, UnicodeDecodeError, EOFError):
        return ""


def _header_kinds(header: Sequence[str], where: str, labels: bool = True,
                  raw: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """The accuracy columns and the proxy columns of a header (its cells stripped; ``raw``: as written, to name
    two cells that differ only by spaces), checked (``labels`` False: no accuracy column is no problem)."""
    if not header or header[0] != ID_COLUMN:
        first = header[0] if header else "nothing"
        raise BenchmarkError(f"{where}: the first column must be {ID_COLUMN!r} (the architecture's name), "
                             f"found {first!r}")
    raw = header if raw is None else raw
    first_at: dict[str, int] = {}
    for index, name in enumerate(header):
        if not name:
            last = " (the last: a comma at the end of the header line?)" if index == len(header) - 1 else ""
            raise BenchmarkError(f"{where}: column {index + 1} has no name{last}")
        if name in first_at:
            before = first_at[name]
            if raw[before] == raw[index]:
                raise BenchmarkError(f"{where}: columns {before + 1} and {index + 1} are both named {name!r}; name "
                                     "each column once")
            raise BenchmarkError(f"{where}: columns {before + 1} ({raw[before]!r}) and {index + 1} ({raw[index]!r}) "
                                 f"are both named {name!r} once the spaces around a name are dropped; name each "
                                 "column once")
        first_at[name] = index
    columns = list(header[1:])
    first_proxy = next((i for i, name in enumerate(columns) if name in STANDARD_PROXIES), len(columns))
    accuracies, proxies = columns[:first_proxy], columns[first_proxy:]
    if not accuracies and labels:
        raise BenchmarkError(f"{where}: no accuracy column between {ID_COLUMN!r} and the first proxy column "
                             f"({columns[0] if columns else 'none'})")
    return accuracies, proxies


def _number(text: str) -> float:
    """A cell's value: NaN for an empty cell or a missing value's spelling, else the number (infinite ones too;
    ValueError for anything else)."""
    text = text.strip()
    if not text or text.lower() in MISSING_SPELLINGS:
        return math.nan
    return cell_number(text)  # ValueError names the cell below


def order_infinities(values: np.ndarray) -> tuple[np.ndarray, int]:
    """A proxy column with each infinite value replaced by a finite one beyond every finite value of the column, so
    that ranks read ``inf`` as the largest and ``-inf`` as the smallest (those of one sign tied): ``+inf`` becomes the
    largest finite value plus the spread of the finite values (at least 1), ``-inf`` the smallest less it (the next
    float out where that overflows). A column with no finite value is returned as NaN. Also the number of infinite
    cells replaced. The exported module of a table search's proxy copies this function."""
    infinite = np.isinf(values)
    count = int(infinite.sum())
    if not count:
        return values, 0
    finite = values[np.isfinite(values)]
    if not finite.size:
        return np.where(infinite, np.nan, values), count
    low, high = float(finite.min()), float(finite.max())
    spread = max(high - low, abs(low), abs(high), 1.0)  # inf where the values span more than the largest float
    out = values.copy()
    for sign, edge in ((1.0, high), (-1.0, low)):
        # beyond the edge by the spread; else the next float out (finite values near the largest float); else a tie
        steps = (edge + sign * spread, math.nextafter(edge, sign * math.inf))
        out[values == sign * np.inf] = next((step for step in steps if math.isfinite(step)), edge)
    return out, count


def _is_comment(line: str) -> bool:
    """Whether a table's line is a comment: its first character other than a space is ``#``, as the ViT CSV
    reader (:mod:`autoprox.data.tables`) reads it. An id that starts with ``#`` is written quoted."""
    return line.lstrip().startswith("#")


class _DataLines:
    """The lines of a table's text that are neither comments (:func:`_is_comment`) nor blank, for ``csv.reader``,
    counting those left out (:attr:`skipped`) so that a row's line in the file is the reader's ``line_num`` plus
    them. A line inside a quoted cell that spans lines (an odd number of ``"`` before it) is kept whatever it
    holds."""

    def __init__(self, lines) -> None:
        self.lines, self.skipped, self.kept, self.quoted = iter(lines), 0, 0, False
        #: The comment lines after the header (each could be a row whose id starts with ``#``), by line number.
        self.body_comments: list[int] = []

    def __iter__(self) -> "_DataLines":
        return self

    def __next__(self) -> str:
        for line in self.lines:
            if not self.quoted and (_is_comment(line) or not line.strip()):
                self.skipped += 1
                if self.kept and line.strip():
                    self.body_comments.append(self.kept + self.skipped)
                continue
            self.kept += 1
            self.quoted ^= line.count('"') % 2 == 1
            return line
        raise StopIteration

    def note(self, path: Path) -> str | None:
        """The note saying which comment lines after the header were skipped, or None."""
        if not self.body_comments:
            return None
        count, first = len(self.body_comments), self.body_comments[0]
        return (f"note: {path.name}: {count} line(s) after the header starting with '#' skipped as comments (the "
                f"first: line {first}); an id that starts with '#' is written quoted (\"#5\")")


def _read_rows(path: Path, lines: _DataLines, stored: _Counted, size: int, progress, labels: bool = True
               ) -> tuple[list, "array.array", list, list]:
    """The ids, the values (row after row, one float64 array) and the accuracy columns and header of a table's
    CSV lines (comments and blank lines left out), each row checked; ``progress(bytes read, size)`` every 65,536
    rows of a file of at least :data:`PROGRESS_BYTES`."""
    import array

    rows = csv.reader(lines)
    try:
        written = next(rows)
    except StopIteration:
        raise BenchmarkError(f"{path}: empty; a proxy table starts with a header row (id, accuracies, proxies)") from None
    except csv.Error as exc:
        raise BenchmarkError(f"{path}: line {rows.line_num + lines.skipped}: {exc}") from None
    header = [cell.strip() for cell in written]
    accuracy_columns = _header_kinds(header, f"{path}: header", labels, written)[0]
    ids: list[str] = []
    seen: dict[str, int] = {}
    values = array.array("d")
    report = progress if progress is not None and size >= PROGRESS_BYTES else None
    try:
        for row in rows:
            line = rows.line_num + lines.skipped
            if report is not None and len(ids) % 65536 == 0:
                report(min(stored.count, size), size)
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise BenchmarkError(f"{path}: line {line}: {len(row)} cells, the header has {len(header)}")
            ident = row[0].strip()
            if not ident:
                raise BenchmarkError(f"{path}: line {line}: empty id")
            if ident in seen:
                raise BenchmarkError(f"{path}: line {line}: id {ident!r} appears again (first on line {seen[ident]}); "
                                     "list each architecture once")
            seen[ident] = line
            numbers = []
            for column, cell in zip(header[1:], row[1:]):
                try:
                    numbers.append(_number(cell))
                except ValueError:
                    raise BenchmarkError(f"{path}: line {line}: column {column!r} is {cell.strip()[:40]!r}, "
                                         "not a number (leave a cell empty where nothing was measured)") from None
            ids.append(ident)
            values.extend(numbers)
    except csv.Error as exc:
        raise BenchmarkError(f"{path}: line {rows.line_num + lines.skipped}: {exc}") from None
    if report is not None:
        report(size, size)
    return ids, values, accuracy_columns, header


def read_proxy_table(path: str | os.PathLike, name: str | None = None, limit: int = MAX_TABLE_BYTES,
                     progress=None, labels: bool = True) -> ProxyTable:
    """Read and check a proxy table (see the module's docstring for the form).

    Parameters
    ----------
    path : path-like
        A ``.csv`` or ``.csv.gz`` file.
    name : str, optional
        What to call it (default: the file name without its suffixes).
    limit : int
        The most bytes the file may hold (after decompression).
    progress : callable, optional
        ``progress(bytes read, file size)`` as a file of at least :data:`PROGRESS_BYTES` is read.
    labels : bool
        False for a reader that needs no labels (``score``): a table of unlabelled candidates is read, with no
        accuracy column (the first column after ``id`` is one of :data:`STANDARD_PROXIES`) or accuracy columns
        with no value. True (default): each is refused.

    Raises
    ------
    BenchmarkError
        In one line naming the file and the first problem found.
    """
    from contextlib import ExitStack

    from autoprox.core.atomic import given_path

    path = given_path(path, "the proxy table", BenchmarkError, "its file")
    with ExitStack() as stack:
        handle, stored, digest, size = _open_text(path, limit, stack)
        try:
            lines = _DataLines(handle)
            ids, values, accuracy_columns, header = _read_rows(path, lines, stored, size, progress,
                                                              labels)
        except UnicodeDecodeError as exc:
            kind = binary_kind(path) if path.suffix != ".gz" else ""
            raise BenchmarkError(f"{path}: {kind}" if kind else f"{path}: not a UTF-8 text file (byte {exc.start} of a "
                                 f"block near byte {stored.count:,}); expected a CSV proxy table") from None
        except (OSError, EOFError) as exc:  # a .gz file that is not gzip, or is cut short; a read that failed
            what = "not a gzip file" if path.suffix == ".gz" else "cannot read it"
            raise BenchmarkError(f"{path}: {what} ({getattr(exc, 'strerror', None) or exc})") from None
        while stored.read(1 << 20):  # the rest of the stored bytes (a gzip trailer), for the digest
            pass
    digest = digest.hexdigest()
    proxy_columns = header[1 + len(accuracy_columns):]
    if not proxy_columns:
        raise BenchmarkError(_no_proxy_column(path, accuracy_columns))
    if len(ids) < MIN_ROWS:
        raise BenchmarkError(f"{path}: only {len(ids)} row(s); a proxy table needs at least {MIN_ROWS} to rank")
    matrix = np.frombuffer(values, dtype=np.float64).reshape(len(ids), len(header) - 1)
    columns = {column: matrix[:, i] for i, column in enumerate(header[1:])}
    for column in accuracy_columns:
        if np.isnan(columns[column]).all() and labels:
            raise BenchmarkError(f"{path}: accuracy column {column!r} has no value")
        _check_target_range(path, column, columns[column], ids)
    notes = [lines.note(path)] if lines.body_comments else []
    for column in proxy_columns:
        columns[column], infinite = order_infinities(columns[column])
        if np.isnan(columns[column]).all():
            raise BenchmarkError(f"{path}: proxy column {column!r} has no "
                                 f"{'finite ' if infinite else ''}value; leave the column out")
        if infinite:
            notes.append(f"note: {path.name}: proxy column {column!r} has {infinite} infinite cell(s); they rank "
                         "beyond its finite values (inf above, -inf below)")
    stem = path.name.split(".")[0]
    return ProxyTable(name or stem, tuple(ids), {c: columns[c] for c in accuracy_columns},
                      {c: columns[c] for c in proxy_columns}, str(path), digest, tuple(notes))


def _no_proxy_column(path: Path, columns: Sequence[str]) -> str:
    """The line refusing a table none of whose columns is named as a standard proxy (``columns``: those after
    ``id``, all read as accuracy columns)."""
    shown = ", ".join(repr(c) for c in columns[:4]) + (f", ... ({len(columns)} in all)" if len(columns) > 4 else "")
    cased = next((c for c in columns if c.strip().lower() in STANDARD_PROXIES), None)
    case = f" (names are case-sensitive: {cased!r} is not {cased.strip().lower()!r})" if cased else ""
    return (f"{path}: no proxy column: proxy columns start at the first column named as a standard proxy "
            f"({', '.join(STANDARD_PROXIES)}), and none is{case}, so every column after 'id' ({shown}) was read as "
            "an accuracy column; put your proxy columns after a standard one (params, the parameter count, say)")


def _check_target_range(path: Path, column: str, values: np.ndarray, ids: Sequence[str]) -> None:
    """Refuse a target cell past :data:`MAX_TARGET_MAGNITUDE`, naming its row's id."""
    beyond = np.flatnonzero(np.abs(np.nan_to_num(values)) > MAX_TARGET_MAGNITUDE)
    if len(beyond):
        row = int(beyond[0])
        raise BenchmarkError(f"{path}: id {ids[row][:80]!r}: target column {column!r} is {values[row]:g}, outside "
                             f"[-{MAX_TARGET_MAGNITUDE:g}, {MAX_TARGET_MAGNITUDE:g}], the range a target accepts (an "
                             "accuracy, a negated loss or any finite score to rank by)")


def is_proxy_table(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a CSV file whose first header cell is ``id`` (the proxy-table form)."""
    path = Path(path)
    if not path.name.endswith((".csv", ".csv.gz")) or not path.is_file():
        return False
    cells = next(csv.reader([first_line(path)]), [])
    return bool(cells) and cells[0].strip() == ID_COLUMN


# ------------------------------------------------------------------------- packaged spaces
def _manifest() -> dict:
    path = resource_dir(PROXY_TABLE_FOLDER) / "spaces.json"
    return json.loads(path.read_text(encoding="utf-8"))


def table_space_names() -> list[str]:
    """The packaged table spaces, by name (``nb201``, ``flexibert``, ``autoformer``, ...)."""
    return list(_manifest()["spaces"])


def table_space_summary(name: str) -> dict:
    """What the manifest says of the packaged table space ``name`` without reading its tables: its description
    and each table's name and targets (what ``autoprox spaces`` lists)."""
    record = _manifest()["spaces"][name]
    return {"name": name, "summary": record.get("description", ""),
            "tables": [{"name": entry["name"], "targets": list(entry["targets"])} for entry in record["tables"]]}


def table_space_files(name: str) -> list[tuple[Path, tuple[str, ...]]]:
    """The files of the packaged table space ``name`` with their targets, as the manifest lists them (what a user
    gives ``search --bench``)."""
    folder = resource_dir(PROXY_TABLE_FOLDER)
    return [(folder / entry["file"], tuple(entry["targets"])) for entry in _manifest()["spaces"][name]["tables"]]


def load_table_space(name: str) -> TableSpace:
    """The packaged table space ``name``, its tables read and checked.

    Raises
    ------
    BenchmarkError
        An unknown name, naming the known ones.
    """
    spaces = _manifest()["spaces"]
    if name not in spaces:
        raise BenchmarkError(f"no packaged table space {name!r}; known: {', '.join(spaces)}")
    record = spaces[name]
    folder = resource_dir(PROXY_TABLE_FOLDER)
    tables, targets = [], []
    for entry in record["tables"]:
        table = read_proxy_table(folder / entry["file"], name=entry["name"])
        tables.append(table)
        targets.append(tuple(table.check_targets(entry["targets"])))
    return TableSpace(name, tuple(tables), tuple(targets), record.get("description", ""),
                      dict(record.get("notes", {})))
