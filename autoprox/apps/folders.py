"""What a folder another command wrote is, for what reads one run (``show``, ``select``,
``ProxySearch.from_run``): a protocol, a few-label protocol, a transfer study or a ViT search named as such, with
the command that reads it, where the run's own check could only say which of a run's files is missing. Here, the
lowest layer that knows every such folder's marker file (each is defined by the app that writes it)."""

from __future__ import annotations

import shlex
from pathlib import Path

from autoprox.core.errors import RunDirError


def folder_kinds() -> list[tuple[str, str, str]]:
    """(the file that marks the folder, what it is, what reads it) of each folder a command writes that is no run."""
    from autoprox.apps.protocols.few_labels import FEW_LABELS_FILE
    from autoprox.apps.protocols.transfer import TRANSFER_FILE
    from autoprox.apps.vitsearch import CONFIG as VIT_SEARCH
    from autoprox.search.rundir import PROTOCOL

    return [
        (FEW_LABELS_FILE, "a few-label protocol that autoprox evaluate --few-labels wrote",
         "autoprox report {q} reads it"),
        (PROTOCOL, "a protocol that autoprox evaluate wrote", "autoprox report {q} reads it"),
        (TRANSFER_FILE, "a transfer study that autoprox transfer wrote",
         "autoprox transfer --resume --out {q} continues it"),
        (VIT_SEARCH, "a ViT search that autoprox vit-search wrote",
         "its best architectures are in {q}/top.json (autoprox.build_vit builds them)"),
    ]


def refuse_other_folder(path: str | Path, command: str) -> None:
    """RunDirError (one line) when ``path`` is a folder with no run's ``config.json`` that another command wrote,
    saying what it is and which command reads it; nothing otherwise (the run's own checks follow)."""
    from autoprox.search.rundir import CONFIG, runs_inside_note

    folder = Path(path)
    try:
        if not folder.is_dir() or (folder / CONFIG).is_file():
            return
    except OSError:
        return
    for marker, what, reader in folder_kinds():
        if (folder / marker).is_file():
            raise RunDirError(f"{command} reads a run directory, and {folder} is {what} ({marker}, no {CONFIG}): "
                              f"{reader.format(q=shlex.quote(str(folder)))}{runs_inside_note(folder)}")
