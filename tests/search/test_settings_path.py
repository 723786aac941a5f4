"""Issues 33 and 42: following a search's settings from :func:`~autoprox.search.engine.run_search` stays in at most 10
files, and never returns to a file it has left (issue 33 allowed one return to each)."""

from __future__ import annotations

import inspect
import sys
from collections import Counter
from pathlib import Path

import autoprox
from autoprox.search.engine import run_search

#: The package's own files; a call elsewhere (the standard library, torch, NumPy) is not followed.
PACKAGE = Path(autoprox.__file__).parent
#: Frames that are part of the function they are written in (Python 3.12 runs comprehensions inline, without one).
INLINE = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}
#: The most files the path may visit, and the most times it may enter any one of them (once: no file revisited).
MOST_FILES = 10
MOST_ENTRIES = 1


def settings_path(settings, out: Path) -> list[tuple[str, list[str]]]:
    """The files a search of ``settings`` into ``out`` enters while following its settings, in order, each
    with the functions entered there before the path left it.

    A call is followed when it is made in a file of the package and, when it is made, one of its frame's locals
    (its arguments, and the variables it closes over) is a followed settings object, or holds one as its
    attribute ``settings`` (``self.settings``, ``context.settings``), by identity. The followed settings objects
    are ``settings`` and every settings object a followed call returns, itself or as its result's ``settings``
    (``RunContext.from_settings`` returns the settings resolved: the targets named, the benchmark path made
    portable): the object the search goes on with. Not followed: a method or property of the settings' own class
    called on a followed settings object (``settings.genome_space``, ``settings.to_json()``: the settings read,
    not handed on), and comprehension frames, which are not calls of their own (:data:`INLINE`). Consecutive
    calls in one file are one entry."""
    kind = type(settings)
    followed = [settings]

    def held(value) -> bool:
        return any(value is s or inspect.getattr_static(value, "settings", None) is s for s in followed)

    def on_return(frame, event, arg):
        if event == "return" and arg is not None:
            derived = arg if isinstance(arg, kind) else inspect.getattr_static(arg, "settings", None)
            if isinstance(derived, kind) and not any(derived is s for s in followed):
                followed.append(derived)
        return on_return

    path: list[tuple[str, list[str]]] = []

    def on_call(frame, event, arg):
        code = frame.f_code
        if not code.co_filename.startswith(str(PACKAGE)) or code.co_name in INLINE:
            return None
        values = frame.f_locals
        if any(values.get("self") is s for s in followed) or not any(held(value) for value in values.values()):
            return None
        name = Path(code.co_filename).relative_to(PACKAGE).as_posix()
        if path and path[-1][0] == name:
            path[-1][1].append(code.co_name)
        else:
            path.append((name, [code.co_name]))
        return on_return

    before = sys.gettrace()
    sys.settrace(on_call)
    try:
        run_search(settings, out, quiet=True)
    finally:
        sys.settrace(before)
    return path


def test_following_the_settings_from_run_search_stays_in_few_files_and_returns_to_none(small_settings, tmp_path):
    """Counted on the collapsed path of :func:`settings_path`: its distinct files (at most :data:`MOST_FILES`), and
    how often the path enters each file (at most :data:`MOST_ENTRIES`: once; a second entry would be a return to a
    file it had left). The message gives the path, its files and its returns: the entries into a file the path had
    already left."""
    path = settings_path(small_settings, tmp_path / "run")
    entries = Counter(name for name, _ in path)
    shown = "\n".join(f"  {name}: {', '.join(dict.fromkeys(functions))}" for name, functions in path)
    message = (f"{len(entries)} files, {len(path) - len(entries)} returns to a file already left; "
               f"entered most: {entries.most_common(3)}; the path:\n{shown}")
    assert path[0][0] == "search/engine.py", message
    assert len(entries) <= MOST_FILES, message
    assert max(entries.values()) <= MOST_ENTRIES, message
