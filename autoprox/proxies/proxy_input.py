"""What a user gives as a proxy, checked before any proxy is built from it: the registry of proxy file formats
and the checks of a proxy file's ``format`` and recorded ``split``, the reading of ``--proxy`` text (a comma list
split at its top-level commas, a mistyped path, a rank formula's problem). :mod:`autoprox.proxies.proxy` builds the
proxy from what passes."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Mapping

from autoprox.core.errors import GenomeError, ProxyError, no_such_path
from autoprox.core.registry import Registry
from autoprox.genome.rank_formula import GRAMMAR_WORDS, OPERATORS, TRANSFORMS, parse_formula
from autoprox.proxies.recommended import is_recommended_name


#: Proxy file formats other than a genome file: the value of a JSON file's ``"format"`` key ->
#: ``read(path, data)`` returning the proxy it holds (registered by the modules that define them,
#: such as :mod:`autoprox.proxies.ensemble`, which the package imports).
PROXY_FILE_FORMATS: Registry[str, Callable[[Path, Mapping], object]] = Registry("proxy file format")


def register_proxy_file_format(name: str):
    """Register the decorated ``read(path, data) -> proxy`` for JSON proxy files whose ``format`` is ``name``."""

    def decorate(read: Callable[[Path, Mapping], object]):
        PROXY_FILE_FORMATS.add(name, read)
        return read

    return decorate


def existing_file(text: str) -> Path | None:
    """``text`` as the path of an existing file, else None (a long genome string is not a
    file name the system accepts: ``OSError: File name too long`` means not a file)."""
    path = Path(text)
    try:
        return path if path.is_file() else None
    except (OSError, ValueError):
        return None


def refuse_missing_proxy_path(part: str) -> None:
    """ProxyError (``PATH: no such file or folder (...)``) for a ``--proxy`` part meant as a path, one with a ``/``
    and none of the calls or quotes of a genome or a rank formula, that names nothing: a mistyped run directory was
    reported as a genome (``not a genome (unexpected character '/' ...)``). Nothing for any other part."""
    if "/" not in part and os.sep not in part or any(c in part for c in '()"') or is_recommended_name(part) \
            or part.endswith(".json"):  # a proxy file's own line says it is not found
        return
    missing = no_such_path(part, "--proxy takes a run directory, a proxy file, a built-in or recommended name, "
                                 "a genome or a rank formula")
    if missing:
        raise ProxyError(missing)


#: A proxy text that can only be meant as a name (no call, no operator).
BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
#: The word a call opens with (``r`` of ``r(nwot``).
_CALL_HEAD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def formula_problem(text: str, operators: bool = False) -> str | None:
    """The rank formula parser's problem with ``text`` when it opens as only a rank formula does: with a transform
    (``r(nwot``) or a word of the formulas' grammar (``lrsum(``), or, with ``operators``, with a formula operator
    too (``mul(``, which a genome's tree may also open with: on a proxy table, which scores no genome). None for any
    other text, or one that parses."""
    head = _CALL_HEAD.match(text)
    words = {*TRANSFORMS.names(), *GRAMMAR_WORDS, *(OPERATORS.names() if operators else ())}
    if head is None or head.group(1) not in words:
        return None
    try:
        parse_formula(text)
    except GenomeError as exc:
        return str(exc)
    return None


def refuse_unknown_format(path: Path, name: object) -> None:
    """ProxyError for a proxy file whose ``format`` is none this autoprox reads: a version of a known format it
    does not read (``autoprox-weighted-formula/99``), or any other name (a file with a ``genome`` has no
    ``format``)."""
    known = sorted(PROXY_FILE_FORMATS.names())
    if not isinstance(name, str):
        raise ProxyError(f"{path}: 'format' must be a string naming a proxy file format ({', '.join(known)}), "
                         f"got {name!r}")
    family = name.rsplit("/", 1)[0]
    versions = [k for k in known if k.rsplit("/", 1)[0] == family]
    if versions:
        raise ProxyError(f"{path}: unknown format version {name!r}: this autoprox reads {', '.join(versions)} "
                         "(a file written by a newer autoprox?)")
    raise ProxyError(f"{path}: unknown proxy file format {name!r}; this autoprox reads {', '.join(known)}, "
                     "or a genome file (a 'genome' string and no 'format', such as a run's best.json)")


def check_recorded_split(path: Path, split: object) -> None:
    """ProxyError unless a genome file's ``split`` is one a run records: a search/test split of a benchmark
    (``seed``, ``search_fraction``, ``search`` and ``test`` parts that together hold each index of
    ``range(n)`` once), or for a run of several benchmarks a list of them, each naming its ``space``. Fields
    left out are let be (``rank`` then splits by seed 0 and fraction 0.6)."""
    entries = split if isinstance(split, list) else [split]
    for n, entry in enumerate(entries):
        where = f"'split'[{n}]" if isinstance(split, list) else "'split'"
        if not isinstance(entry, dict):
            raise ProxyError(f"{path}: {where} must be an object with the run's search and test parts, "
                             f"got {entry!r:.60}")
        if isinstance(split, list) and not isinstance(entry.get("space"), str):
            raise ProxyError(f"{path}: {where} must name its benchmark's 'space' (a run of several benchmarks)")
        seed, fraction = entry.get("seed", 0), entry.get("search_fraction", 0.6)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ProxyError(f"{path}: {where}: 'seed' must be an integer, got {seed!r:.60}")
        if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not 0 < fraction <= 1:
            raise ProxyError(f"{path}: {where}: 'search_fraction' must be a number in (0, 1], got {fraction!r:.60}")
        if "search" not in entry and "test" not in entry:
            continue
        parts = {part: entry.get(part) for part in ("search", "test")}
        for part, indices in parts.items():
            if not isinstance(indices, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                        for i in indices):
                raise ProxyError(f"{path}: {where}: {part!r} must be a list of architecture indices, "
                                 f"got {indices!r:.60}")
        size = len(parts["search"]) + len(parts["test"])
        if not parts["search"] or sorted(parts["search"] + parts["test"]) != list(range(size)):
            raise ProxyError(f"{path}: {where}: 'search' and 'test' are no split of a benchmark (together they "
                             f"must hold each index 0 to {size - 1} once, and 'search' at least one)")


def split_proxy_list(text: str) -> list[str]:
    """Split a comma list of proxies at top-level commas only (genome strings hold commas; so may a rank formula's
    quoted column name, ``r("a,b")``)."""
    parts, depth, current, quoted, escaped = [], 0, [], False, False
    for char in text:
        if quoted:
            quoted, escaped = (escaped or char != '"'), (not escaped and char == "\\")
            current.append(char)
            continue
        if char == '"':
            quoted = True
        elif char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        current.append(char)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


__all__ = ["BARE_WORD", "PROXY_FILE_FORMATS", "check_recorded_split", "existing_file", "formula_problem",
           "refuse_missing_proxy_path", "refuse_unknown_format", "register_proxy_file_format", "split_proxy_list"]
