"""Recommended proxies: ``recommended:SPACE/TARGET`` names read from a manifest.

The manifest (``recommended.json``, shipped with the package in
``autoprox/resources/recommended/``) names, for each space, the
proxy to use for each target and the joint one (``joint``), each a proxy file the
engine wrote (a run's ``best.json`` or an ensemble file) searched with the
configuration the evaluation protocol chose. A manifest looks like::

    {"format": "autoprox-recommended/1",
     "spaces": {"autoformer": {"joint": {"file": "recommended/autoformer/joint.json", ...},
                               "c100_kd": {"file": "...", ...}}}}

File paths are relative to the manifest's folder. Each entry may carry more keys (its
run, the protocol figures behind the choice); only ``file`` is needed to score.

Where the manifest is looked for: the file the ``AUTOPROX_RECOMMENDED`` environment
variable names when it is set, else the packaged manifest, so the names resolve in any
folder, from a wheel as from a clone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from autoprox.core.atomic import read_json_file
from autoprox.core.errors import ProxyError
from autoprox.core.resources import packaged_manifest

#: The prefix of a recommended proxy's name.
PREFIX = "recommended:"
#: The manifest's format key.
FORMAT = "autoprox-recommended/1"
#: The entry name of a space's joint proxy (one score for every target).
JOINT = "joint"
#: Environment variable naming a manifest file.
ENVIRONMENT = "AUTOPROX_RECOMMENDED"


def is_recommended_name(text: str) -> bool:
    """Whether ``text`` is a ``recommended:`` name."""
    return text.startswith(PREFIX)


def split_recommended_name(text: str) -> tuple[str, str]:
    """``(space, entry)`` of a ``recommended:SPACE[/ENTRY]`` name (entry :data:`JOINT` when left out)."""
    space, _, entry = text[len(PREFIX):].partition("/")
    return space, entry or JOINT


def manifest_candidates(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Where the manifest is looked for, in order (see the module docstring)."""
    environ = os.environ if environ is None else environ
    if environ.get(ENVIRONMENT):
        return [Path(environ[ENVIRONMENT])]
    return [packaged_manifest()]


def find_manifest(environ: Mapping[str, str] | None = None) -> Path:
    """The manifest of :func:`manifest_candidates`; ProxyError naming where it looked.

    A manifest named by ``AUTOPROX_RECOMMENDED`` must exist: a typo there is not silently
    replaced by the packaged manifest.
    """
    environ = os.environ if environ is None else environ
    path = manifest_candidates(environ)[0]
    if path.is_file():
        return path
    if environ.get(ENVIRONMENT):
        raise ProxyError(f"{ENVIRONMENT}={environ[ENVIRONMENT]}: no such manifest file")
    raise ProxyError(f"the packaged recommended-proxy manifest {path} is missing (a broken install?); "
                     f"set {ENVIRONMENT}")


def load_manifest(path: str | Path) -> dict:
    """The manifest at ``path``, checked; ProxyError with one line naming the file and the problem."""
    path = Path(path)
    data = read_json_file(path, "a readable recommended-proxy manifest", ProxyError)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ProxyError(f"{path}: not a recommended-proxy manifest (its 'format' is not {FORMAT!r})")
    spaces = data.get("spaces")
    if not isinstance(spaces, dict) or not spaces:
        raise ProxyError(f"{path}: 'spaces' must be a non-empty object")
    for space, entries in spaces.items():
        if not isinstance(entries, dict) or not entries:
            raise ProxyError(f"{path}: spaces.{space} must be a non-empty object of entries")
        for name, entry in entries.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("file"), str) or not entry["file"]:
                raise ProxyError(f"{path}: spaces.{space}.{name} needs a 'file' string")
    return data


def recommended_names(manifest: Mapping) -> list[str]:
    """Every ``recommended:SPACE/ENTRY`` name of a loaded manifest, joint ones first per space."""
    names = []
    for space, entries in manifest["spaces"].items():
        ordered = sorted(entries, key=lambda n: (n != JOINT, list(entries).index(n)))
        names += [f"{PREFIX}{space}/{entry}" for entry in ordered]
    return names


def resolve_recommended(text: str, manifest_path: str | Path | None = None) -> tuple[Path, dict]:
    """The proxy file a ``recommended:SPACE/ENTRY`` name stands for, and its manifest entry.

    ``ENTRY`` is a target name or ``joint``; ``recommended:SPACE`` alone means the joint
    proxy. ProxyError, naming the known names, for an unknown space or entry or a file the
    manifest names but the tree lacks.
    """
    if not is_recommended_name(text):
        raise ProxyError(f"{text!r} is not a recommended proxy name ({PREFIX}SPACE/TARGET)")
    path = Path(manifest_path) if manifest_path is not None else find_manifest()
    manifest = load_manifest(path)
    space, entry = split_recommended_name(text)
    entries = manifest["spaces"].get(space)
    if entries is None or entry not in entries:
        raise ProxyError(f"unknown recommended proxy {text!r}; {path} names: {', '.join(recommended_names(manifest))}")
    file = (path.parent / entries[entry]["file"]).resolve()
    if not file.is_file():
        raise ProxyError(f"{path}: {text} names {entries[entry]['file']}, which is not a file")
    return file, dict(entries[entry])


__all__ = ["ENVIRONMENT", "FORMAT", "JOINT", "PREFIX", "find_manifest", "is_recommended_name",
           "load_manifest", "manifest_candidates", "recommended_names", "resolve_recommended",
           "split_recommended_name"]
