"""Pack and unpack the archived parts of committed runs (standard library only).

Usage:
    python scripts/runs_archive.py pack runs/leave-space-out/NAME  # a finished protocol, any kind
    python scripts/runs_archive.py pack runs/pit-reference         # a finished search run
    python scripts/runs_archive.py unpack runs/protocol/pit-best   # restore what resume needs
    python scripts/runs_archive.py unpack runs/protocol/*          # every protocol
    python scripts/runs_archive.py check runs                      # every archive agrees with its folder
    python scripts/runs_archive.py drop runs/protocol/pit-best-hof-average  # a re-selection's archive left out

A committed directory holds the parts no report or table reads in one ``archive.tar.xz``
beside what a user reads (runs/README.md):

- an evaluation protocol (``protocol.json`` with ``folds``, ``autoprox evaluate``): the whole
  ``protocol.json`` as ``autoprox evaluate`` wrote it and every fold's run directory
  (``repeat-R/fold-K*/``: ``config.json``, ``log.jsonl``, ``best.json``, ``hall_of_fame.json``,
  bagged ensembles). A finished fold's ``checkpoint.json`` and ``evaluations.jsonl`` are left out and
  removed: they serve only to resume the fold's search, and nothing resumes it once it has finished
  (the protocol's resume takes a finished fold as it is; ``--reuse-searches`` reads ``best.json`` and
  the hall of fame), and the fold's ``config.json`` names the command that makes it again. The ``protocol.json`` left beside
  it keeps everything but the folds' per-architecture test scores, fitted ensembles and baseline
  choices, and each repeat's per-target paired differences (its JCM rows and per-target test figures stay);
- a leave-one-space-out protocol (``protocol.json`` with ``directions``, ``autoprox evaluate
  --leave-space-out``): the whole ``protocol.json`` and every search's run directory. The
  ``protocol.json`` left beside it keeps everything but the per-architecture scores of the
  searches and the baselines: each search's genome, figures and iterations, which the cross-space
  tables read;
- a search run (``config.json``): its ``checkpoint.json`` and ``evaluations.jsonl``; its
  ``log.jsonl`` is stored beside as ``log.jsonl.xz``, which ``autoprox show``, ``curves`` and
  ``report`` read as they read ``log.jsonl`` (and a resumed run continues in ``log.jsonl``).
  A run without ``evaluations.jsonl`` keeps no checkpoint (it is removed, and no archive is
  made): a resume rebuilds the hall of fame from the evaluations, so ``autoprox search
  --resume`` refuses such a run;
- a training-free ViT search (``vit_search.json``, ``autoprox vit-search``): its ``scores.jsonl``
  (the ranking is in ``top.json`` and ``top.csv``).

A trimmed ``protocol.json`` names the archive under ``"archive"``. ``unpack`` extracts in place,
puts the whole ``protocol.json`` back and leaves the archive (it refuses members outside the
folder), so that ``autoprox evaluate --resume``, ``--reuse-searches`` and ``autoprox search
--resume`` find what they need. ``pack`` on a folder whose archive is unpacked packs it again
(a resumed or grown run or protocol).

``drop`` leaves out the archive of a packed re-selection (``autoprox evaluate --reuse-searches``): it
holds only the whole ``protocol.json``, which ``autoprox evaluate --reuse-searches SOURCE --selection S``
makes again from the committed searches it re-scores, to the same figures, as long as those have as
many repeats as it. The trimmed ``protocol.json`` then says so under ``"archive"`` (``"dropped"``, and
``"remake"``: that command), and ``check`` verifies that the searches it names are committed and have
not grown. What ``drop`` cannot check is that today's code scores them as the recorded one did (a
selection renamed since, say): remake the protocol once and compare its figures before dropping.
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import os
import sys
import tarfile
from pathlib import Path

ARCHIVE = "archive.tar.xz"
PROTOCOL = "protocol.json"
#: What a protocol.json beside its archive keeps of each fold's result (the tables of docs/results-*.md read these).
KEPT_RESULT = ("proxy", "genome", "search_jcm", "kendall", "jcm")
#: The archived files of a search run.
RUN_FILES = ("checkpoint.json", "evaluations.jsonl")
#: A search run's log, and how it is stored beside the archive.
LOG, LOG_PACKED = "log.jsonl", "log.jsonl.xz"
#: A training-free ViT search (``autoprox vit-search``) and its archived files: every architecture's score.
VIT_SEARCH, VIT_FILES = "vit_search.json", ("scores.jsonl",)


class ArchiveError(Exception):
    """A folder that cannot be packed, or an archive that does not match its folder."""


def _dump(data: object) -> str:
    """JSON on one line, without spaces (the same values, every digit): the committed runs stay small (runs/README.md)
    and tools read it as they read autoprox's indented JSON; ``python -m json.tool FILE`` shows it indented."""
    return json.dumps(data, separators=(",", ":"))


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` through a temporary file beside it, so that it is whole or absent."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def _marker(holds: str) -> dict:
    return {"file": ARCHIVE, "unpack": "python scripts/runs_archive.py unpack DIR", "holds": holds}


def trimmed_protocol(protocol: dict) -> dict:
    """``protocol.json`` without its bulky parts, naming the archive that holds them: of an evaluation
    protocol, the folds' per-architecture test scores, fitted ensembles and baseline choices, and each repeat's
    per-target differences (a repeat's summary keeps its JCM rows and per-target test figures, which the tables
    and the HTML report read); of a leave-one-space-out protocol, the per-architecture scores of its searches
    and baselines."""
    if "directions" in protocol:
        directions = [{**d, "baselines": None if d.get("baselines") is None else
                       {k: v for k, v in d["baselines"].items() if k != "scores"},
                       "searches": [{k: v for k, v in s.items() if k not in ("scores", "genome_scores")}
                                    for s in d["searches"]]}
                      for d in protocol["directions"]]
        return {**protocol, "directions": directions,
                "archive": _marker("the whole protocol.json and every search's run directory")}
    folds = [{**fold, "result": None if fold.get("result") is None else
              {k: fold["result"][k] for k in KEPT_RESULT if k in fold["result"]}} for fold in protocol["folds"]]
    trimmed = {**protocol, "folds": folds}
    if "repeat_summaries" in protocol:
        trimmed["repeat_summaries"] = [{**summary, "targets": {target: {"test": figures["test"]} for target, figures
                                                              in summary["targets"].items()}}
                                       for summary in protocol["repeat_summaries"]]
    return {**trimmed, "archive": _marker("the whole protocol.json and every fold's run directory")}


def _dropped_marker(source: str, selection: str) -> dict:
    return {"dropped": f"not committed, to keep runs/ small: it held only the whole protocol.json, which the "
                       f"remake command makes again from the searches of {source}, to the same figures fold by fold",
            "remake": f"python scripts/runs_archive.py unpack {source}, then autoprox evaluate --reuse-searches "
                      f"{source} --selection {selection} --out NEW_FOLDER",
            "holds": "the whole protocol.json"}


def reused_searches(protocol: dict, folder: Path) -> str | None:
    """The folder (as a path from where ``folder`` is named) whose searches a re-selection protocol in ``folder``
    re-scores: its command's ``--reuse-searches``, else its recorded ``protocol.searches`` (relative to
    ``folder``); None for a protocol that ran its own searches."""
    searches = protocol.get("protocol", {}).get("searches")
    if not searches:
        return None
    command = protocol.get("command") or []
    if "--reuse-searches" in command[:-1]:
        return str(command[command.index("--reuse-searches") + 1])
    return os.path.normpath(folder / searches)


def _remake_problem(protocol: dict, folder: Path, source: str | None) -> str | None:
    """Why ``autoprox evaluate --reuse-searches SOURCE --selection S`` would not make the protocol in ``folder``
    again, fold for fold, or None: it is not a re-selection, it has bags (whose searches are its own), or the
    searches it re-scores are not there or have grown since (another number of repeats)."""
    if source is None or "folds" not in protocol:
        return "not a re-selection protocol (autoprox evaluate --reuse-searches)"
    if protocol["protocol"].get("bags"):
        return "its bag searches are its own"
    searched = _read_protocol(Path(source))
    if searched is None:
        return f"the searches it re-scores ({source}) are not there"
    repeats = searched.get("protocol", {}).get("repeats")
    if repeats != protocol["protocol"].get("repeats"):
        return (f"the searches it re-scores ({source}) have {repeats} repeats, it {protocol['protocol'].get('repeats')}: "
                "its command would make other folds")
    return None


def drop(folder: Path) -> None:
    """Leave out the archive of a packed re-selection protocol (module docstring); ArchiveError for any other."""
    protocol = _read_protocol(folder)
    source = None if protocol is None else reused_searches(protocol, folder)
    problem = f"no {PROTOCOL} there" if protocol is None else _remake_problem(protocol, folder, source)
    if problem:
        raise ArchiveError(f"{folder}: {problem}; only a re-selection that its command makes again can drop its "
                           "archive")
    if "dropped" in protocol.get("archive", {}):
        raise ArchiveError(f"{folder / PROTOCOL}: its archive was dropped already")
    if "file" not in protocol.get("archive", {}):
        raise ArchiveError(f"{folder / PROTOCOL}: not packed (pack it first, then drop its archive)")
    with _open(folder) as tar:
        names = tar.getnames()
    if names != [PROTOCOL] or check(folder):
        raise ArchiveError(f"{folder / ARCHIVE}: holds more than the protocol.json its trim was made from")
    marker = _dropped_marker(source, protocol["protocol"]["selection"])
    _write_atomic(folder / PROTOCOL, (_dump({**protocol, "archive": marker}) + "\n").encode())
    (folder / ARCHIVE).unlink()


def check_dropped(folder: Path) -> list[str]:
    """Problems of a protocol whose archive was dropped: an archive beside it after all, or (a re-selection) its
    remake command that would not make it again (:func:`_remake_problem`)."""
    protocol = _read_protocol(folder)
    if (folder / ARCHIVE).exists():
        return [f"{folder / PROTOCOL}: says its archive was dropped, and {ARCHIVE} is beside it"]
    if "folds" not in protocol:
        return []
    problem = _remake_problem(protocol, folder, reused_searches(protocol, folder))
    return [f"{folder / PROTOCOL}: its archive was dropped, and {problem}"] if problem else []


def _read_protocol(folder: Path) -> dict | None:
    """The ``protocol.json`` of ``folder``, None when it has none; ArchiveError when it is not one."""
    path = folder / PROTOCOL
    if not path.is_file():
        return None
    try:
        protocol = json.loads(path.read_text())
    except ValueError as error:
        raise ArchiveError(f"{path} is not valid JSON ({error})") from None
    if not isinstance(protocol, dict) or not ("folds" in protocol or "directions" in protocol):
        raise ArchiveError(f"{path}: neither an evaluation protocol (folds) nor a leave-one-space-out one "
                           "(directions)")
    return protocol


def _members(folder: Path, protocol: dict | None) -> list[Path]:
    """The files of ``folder`` that go into its archive (relative paths, sorted)."""
    if protocol is not None and "directions" in protocol:
        searches = sorted(p.relative_to(folder) for d in protocol["directions"]
                          for p in (folder / d["run"]).glob("**/*") if p.is_file())
        return [Path(PROTOCOL), *searches]
    if protocol is not None:
        left_out = set(_finished_resume_files(folder))
        folds = sorted(p.relative_to(folder) for p in folder.glob("repeat-*/**/*") if p.is_file() and p not in left_out)
        return [Path(PROTOCOL), *folds]
    if (folder / "config.json").is_file():  # a checkpoint only with the evaluations a resume rebuilds from
        return [Path(name) for name in RUN_FILES if (folder / name).is_file()] \
            if (folder / "evaluations.jsonl").is_file() else []
    if (folder / VIT_SEARCH).is_file():
        return [Path(name) for name in VIT_FILES if (folder / name).is_file()]
    raise ArchiveError(f"{folder}: neither a protocol, a search run nor a ViT search")


def _finished_resume_files(folder: Path) -> list[Path]:
    """The resume files (:data:`RUN_FILES`: ``checkpoint.json``, ``evaluations.jsonl``) of every finished
    search in an evaluation protocol's folds: nothing reads them (``autoprox evaluate --resume`` takes a
    finished fold as it is, growing adds folds, ``--reuse-searches`` reads best.json and the hall of fame),
    so the archive leaves them out; the fold's ``config.json`` has the command that makes them again."""
    found = []
    for best in folder.glob("repeat-*/**/best.json"):
        try:
            finished = json.loads(best.read_text()).get("finished") is True
        except (OSError, ValueError, AttributeError):
            finished = False
        if finished:
            found += [best.parent / name for name in RUN_FILES if (best.parent / name).is_file()]
    return sorted(found)


def _check_packable(folder: Path, protocol: dict | None) -> None:
    """ArchiveError unless ``folder`` holds a finished protocol or run, unpacked if it has an archive."""
    if protocol is not None:
        if "archive" in protocol:
            raise ArchiveError(f"{folder / PROTOCOL} is the trimmed record of {folder / ARCHIVE}; unpack it first")
        if not protocol.get("finished"):
            raise ArchiveError(f"{folder}: the protocol has not finished; archive it once it has")
    elif (folder / "config.json").is_file() or (folder / VIT_SEARCH).is_file():
        result = "top.json" if (folder / VIT_SEARCH).is_file() else "best.json"
        try:
            finished = json.loads((folder / result).read_text()).get("finished")
        except (OSError, ValueError, AttributeError):
            finished = False
        if not finished:
            raise ArchiveError(f"{folder}: the run has not finished (no {result} saying so); archive it once it has")
    if (folder / ARCHIVE).exists():
        with _open(folder) as tar:
            missing = [name for name in tar.getnames() if not (folder / name).exists()]
        if missing:
            raise ArchiveError(f"{folder / ARCHIVE} is packed ({missing[0]} is only in it); unpack it first")


def _tar(folder: Path, members: list[Path]) -> bytes:
    """An xz-compressed tar of ``members``; the same files give the same bytes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=9) as tar:
        for member in members:
            info = tar.gettarinfo(folder / member, arcname=member.as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(folder / member, "rb") as handle:
                tar.addfile(info, handle)
    return buffer.getvalue()


def pack(folder: Path) -> int:
    """Archive ``folder``'s members into ``folder/archive.tar.xz`` (a search run's log compressed beside
    it), then leave only what a user reads; the number of files archived."""
    protocol = _read_protocol(folder)
    _check_packable(folder, protocol)
    members = _members(folder, protocol)
    if protocol is not None:
        left_out = _finished_resume_files(folder) if "folds" in protocol else []
    else:  # a run without evaluations.jsonl cannot be resumed (autoprox search --resume says so)
        left_out = [] if members or not (folder / "checkpoint.json").is_file() else [folder / "checkpoint.json"]
    log = folder / LOG if protocol is None else None
    if not members and not left_out and not (log and log.is_file()):
        raise ArchiveError(f"{folder}: nothing to archive")
    if members:
        _write_atomic(folder / ARCHIVE, _tar(folder, members))
    elif (folder / ARCHIVE).is_file():  # packed before, unpacked (checked above): nothing left to hold
        (folder / ARCHIVE).unlink()
    if log is not None and log.is_file():
        _write_atomic(folder / LOG_PACKED, lzma.compress(log.read_bytes(), preset=9))
        log.unlink()
    for member in members:
        if member.name != PROTOCOL:
            (folder / member).unlink()
    for path in left_out:
        path.unlink()
    for directory in sorted({p for m in members for p in (folder / m).parents if folder in p.parents},
                            key=lambda p: len(p.parts), reverse=True):
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
    if protocol is not None:
        _write_atomic(folder / PROTOCOL, (_dump(trimmed_protocol(protocol)) + "\n").encode())
    return len(members)


def _open(folder: Path) -> tarfile.TarFile:
    path = folder / ARCHIVE
    if not path.is_file():
        raise ArchiveError(f"{folder}: no {ARCHIVE}")
    return tarfile.open(path, "r:xz")


def unpack(folder: Path) -> int:
    """Extract ``folder/archive.tar.xz`` in place (the whole protocol.json replaces the trimmed one)."""
    with _open(folder) as tar:
        members = tar.getmembers()
        if hasattr(tarfile, "data_filter"):
            tar.extractall(folder, members=members, filter="data")  # refuses paths outside folder, links, devices
        else:  # Python before 3.11.4 has no extraction filters: the same refusals, checked here
            for member in members:
                _check_member(folder, member)
            tar.extractall(folder, members=members)
    return len(members)


def _check_member(folder: Path, member: tarfile.TarInfo) -> None:
    """TarError unless ``member`` is a plain file or folder that extracts inside ``folder``."""
    target = (folder / member.name).resolve()
    if not (member.isfile() or member.isdir()) or not target.is_relative_to(folder.resolve()):
        raise tarfile.TarError(f"{member.name!r} is not a plain file or folder inside {folder}")


def check(folder: Path) -> list[str]:
    """Problems of one archive: a protocol.json beside it that is not the trim of the archived one, a run
    the protocol records that is not there, a search run's archive holding other files, a log that is
    not xz data."""
    problems = []
    with _open(folder) as tar:
        names = tar.getnames()
        if PROTOCOL not in names:  # a search run or a ViT search
            kept = VIT_FILES if (folder / VIT_SEARCH).is_file() else RUN_FILES
            extra = sorted(set(names) - set(kept))
            if extra:
                problems.append(f"{folder / ARCHIVE}: holds {', '.join(extra)}, not only {' and '.join(kept)}")
            if "checkpoint.json" in names and "evaluations.jsonl" not in names:
                problems.append(f"{folder / ARCHIVE}: a checkpoint without the evaluations a resume needs")
            if (folder / LOG_PACKED).is_file():
                try:
                    lzma.decompress((folder / LOG_PACKED).read_bytes())
                except lzma.LZMAError as error:
                    problems.append(f"{folder / LOG_PACKED}: not xz data ({error})")
            return problems
        archived = json.load(io.TextIOWrapper(tar.extractfile(PROTOCOL)))
        beside = json.loads((folder / PROTOCOL).read_text())
        if beside != trimmed_protocol(archived) and beside != archived:
            problems.append(f"{folder / PROTOCOL}: neither the archived protocol.json nor its trim")
        if "directions" in archived:  # every scored search: its run archived, its iterations recorded beside
            runs = {s["run"] for d in archived["directions"] for s in d["searches"] if s.get("scores")}
            gone = sorted(s["run"] for d in beside["directions"] for s in d["searches"]
                          if s["run"] in runs and "iteration" not in s)
            if gone:
                problems.append(f"{folder / PROTOCOL}: no iterations recorded for {', '.join(gone)} "
                                "(the cross-space tables read them)")
        else:  # a protocol that re-scores another's searches (--reuse-searches) has no fold runs of its own
            runs = set() if archived["protocol"].get("searches") else {f["run"] for f in archived["folds"]}
        missing = sorted(r for r in runs if f"{r}/config.json" not in names)
        if missing:
            problems.append(f"{folder / ARCHIVE}: no run directory for {', '.join(missing)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["pack", "unpack", "check", "drop"])
    parser.add_argument("folders", nargs="+", type=Path,
                        help="protocol or run folders (check: folders searched for archives)")
    args = parser.parse_args(argv)
    try:
        if args.action == "check":
            archives = sorted({p.parent for f in args.folders for p in f.rglob(ARCHIVE)})
            dropped = sorted({p.parent for f in args.folders for p in f.rglob(PROTOCOL)
                              if "dropped" in (_read_protocol(p.parent) or {}).get("archive", {})})
            problems = [line for folder in archives for line in check(folder)]
            problems += [line for folder in dropped for line in check_dropped(folder)]
            print("\n".join(problems) or f"{len(archives)} archives agree with their folders "
                  f"({len(dropped)} protocols' archives dropped)")
            return 1 if problems else 0
        for folder in args.folders:
            if args.action == "drop":
                drop(folder)
                print(f"{folder}: {ARCHIVE} dropped; {PROTOCOL} says how to make it again")
            elif args.action == "pack":
                count = pack(folder)
                print(f"{folder}: {count} files packed in {ARCHIVE}" if count else f"{folder}: {LOG} compressed")
            else:
                print(f"{folder / ARCHIVE}: {unpack(folder)} files unpacked into {folder}")
    except (ArchiveError, OSError, tarfile.TarError) as error:
        print(f"runs_archive: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
