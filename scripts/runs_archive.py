"""Pack and unpack the archived parts of committed runs (standard library only).

Usage:
    python scripts/runs_archive.py unpack runs/protocol/pit-best   # restore a protocol's fold runs
    python scripts/runs_archive.py unpack runs/protocol/*          # every protocol
    python scripts/runs_archive.py pack runs/protocol/NAME         # archive a finished protocol
    python scripts/runs_archive.py check runs                      # every archive agrees with its folder

A committed directory with parts that no figure needs holds them in one ``archive.tar.xz``
beside what a user reads (runs/README.md):

- an evaluation protocol (``protocol.json``): the whole ``protocol.json`` as
  ``autoprox evaluate`` wrote it and every fold's run directory (``repeat-R/fold-K*/``:
  ``config.json``, ``log.jsonl``, ``checkpoint.json``, ``best.json``, ``hall_of_fame.json``,
  bagged ensembles). The ``protocol.json`` left beside it keeps everything but the folds'
  per-architecture test scores, fitted ensembles and baseline choices, and names the archive
  under ``"archive"``. ``unpack`` puts the whole file back, so that ``autoprox evaluate
  --resume`` and ``--reuse-searches`` find what they need;
- a search run (``config.json``): its ``evaluations.jsonl`` (the hall of fame beside it is
  complete, so ``autoprox show`` does not need it).

``unpack`` extracts in place and leaves the archive; it refuses members outside the folder.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
from pathlib import Path

ARCHIVE = "archive.tar.xz"
PROTOCOL = "protocol.json"
#: What a protocol.json beside its archive keeps of each fold's result (docs/results.md's tables read these).
KEPT_RESULT = ("proxy", "genome", "search_jcm", "kendall", "jcm")
#: The archived files of a search run.
RUN_FILES = ("evaluations.jsonl",)


class ArchiveError(Exception):
    """A folder that cannot be packed, or an archive that does not match its folder."""


def _dump(data: dict) -> str:
    return json.dumps(data, indent=2) + "\n"  # as autoprox writes JSON (autoprox/core/atomic.py)


def trimmed_protocol(protocol: dict) -> dict:
    """``protocol.json`` without the folds' bulky parts: the settings, folds, their figures and the summaries."""
    folds = [{**fold, "result": None if fold.get("result") is None else
              {k: fold["result"][k] for k in KEPT_RESULT if k in fold["result"]}} for fold in protocol["folds"]]
    return {**protocol, "folds": folds,
            "archive": {"file": ARCHIVE, "unpack": "python scripts/runs_archive.py unpack DIR",
                        "holds": "the whole protocol.json and every fold's run directory"}}


def _members(folder: Path) -> list[Path]:
    """The files of ``folder`` that go into its archive (relative paths, sorted)."""
    if (folder / PROTOCOL).is_file():
        folds = sorted(p.relative_to(folder) for p in folder.glob("repeat-*/**/*") if p.is_file())
        return [Path(PROTOCOL), *folds]
    if (folder / "config.json").is_file():
        return [Path(name) for name in RUN_FILES if (folder / name).is_file()]
    raise ArchiveError(f"{folder}: neither an evaluation protocol nor a run directory")


def pack(folder: Path) -> None:
    """Archive ``folder``'s members into ``folder/archive.tar.xz``, then leave only what a user reads."""
    if (folder / ARCHIVE).exists():
        raise ArchiveError(f"{folder / ARCHIVE} exists; unpack it first")
    members = _members(folder)
    if not members:
        raise ArchiveError(f"{folder}: nothing to archive")
    protocol = json.loads((folder / PROTOCOL).read_text()) if members[0].name == PROTOCOL else None
    if protocol is not None and not protocol.get("finished"):
        raise ArchiveError(f"{folder}: the protocol has not finished; archive it once it has")
    with tarfile.open(folder / ARCHIVE, "w:xz", preset=9) as tar:
        for member in members:
            info = tar.gettarinfo(folder / member, arcname=member.as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0  # the same files give the same archive
            with open(folder / member, "rb") as handle:
                tar.addfile(info, handle)
    for member in members:
        if member.name != PROTOCOL:
            (folder / member).unlink()
    for directory in sorted((p for p in folder.glob("repeat-*/**") if p.is_dir()), reverse=True):
        directory.rmdir()
    for directory in folder.glob("repeat-*"):
        directory.rmdir()
    if protocol is not None:
        (folder / PROTOCOL).write_text(_dump(trimmed_protocol(protocol)))


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
    """Problems of one archive: a protocol.json beside it that is not the trim of the archived one."""
    problems = []
    with _open(folder) as tar:
        names = tar.getnames()
        if PROTOCOL in names:
            archived = json.load(io.TextIOWrapper(tar.extractfile(PROTOCOL)))
            beside = json.loads((folder / PROTOCOL).read_text())
            if beside != trimmed_protocol(archived) and beside != archived:
                problems.append(f"{folder / PROTOCOL}: neither the archived protocol.json nor its trim")
            # a protocol that re-scores another's searches (--reuse-searches) has no fold runs of its own
            runs = set() if archived["protocol"].get("searches") else {f["run"] for f in archived["folds"]}
            missing = sorted(r for r in runs if f"{r}/config.json" not in names)
            if missing:
                problems.append(f"{folder / ARCHIVE}: no run directory for {', '.join(missing)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["pack", "unpack", "check"])
    parser.add_argument("folders", nargs="+", type=Path,
                        help="protocol or run folders (check: folders searched for archives)")
    args = parser.parse_args(argv)
    try:
        if args.action == "check":
            archives = sorted({p.parent for f in args.folders for p in f.rglob(ARCHIVE)})
            problems = [line for folder in archives for line in check(folder)]
            print("\n".join(problems) or f"{len(archives)} archives agree with their folders")
            return 1 if problems else 0
        for folder in args.folders:
            if args.action == "pack":
                pack(folder)
                print(f"{folder / ARCHIVE}: packed")
            else:
                print(f"{folder / ARCHIVE}: {unpack(folder)} files unpacked into {folder}")
    except (ArchiveError, OSError, tarfile.TarError) as error:
        print(f"runs_archive: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
