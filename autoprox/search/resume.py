"""Resuming a search: the one way ``search --resume``, ``transfer --resume`` and ``ProxySearch.fit`` check the
options given against a run's recorded settings, and continue it.

An option given on resume must agree with the run's recorded setting, except the session options of the
table (:attr:`~autoprox.search.options.Option.session`: where the benchmark and the cache are, workers,
scheduler, the new total of iterations, output), which apply to this session only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from autoprox.core.errors import ConfigError
from autoprox.core.parallel import Executor
from autoprox.genome.terminals import PAPER_TERMINALS, check_terminals
from autoprox.search.options import OPTIONS, SEARCH_OPTIONS, seed_genomes, session_options
from autoprox.search.conversions import aggregation_names
from autoprox.search.objectives import parse_fitness
from autoprox.search.settings import SearchSettings, options_from_settings, recorded_settings
from autoprox.search.rundir import RunDirectory

#: The options that choose the terminal sets together.
_TERMINAL_OPTIONS = ("terminals", "arch_terminals", "spread_terminals")


def resume_conflicts(given: Mapping[str, Any], settings: SearchSettings, space: str | None,
                     honoured: Iterable[str] = ()) -> list[str]:
    """For a resume: each given option, other than session options and ``honoured`` ones, whose value
    differs from the run's recorded setting, as ``--name VALUE (the run has VALUE)``."""
    recorded = options_from_settings(settings, space)
    skip = set(honoured) | {option.name for option in SEARCH_OPTIONS if option.session} | {"space_file"}
    if settings.multi_space:  # which spaces: the benchmarks' digests, checked on resume, say it
        skip.add("space")
    conflicts = []
    chosen = [name for name in _TERMINAL_OPTIONS if name in given and name not in skip]
    if chosen:  # --terminals and the flags that add to it are compared as the one set they make
        mine = _terminal_sets(given)
        theirs = settings.genome_space.terminals
        if mine != theirs:
            shown = " ".join(f"{OPTIONS[name].flag_name}" + ("" if OPTIONS[name].flag else f" {_show(given[name])}")
                             for name in chosen)
            conflicts.append(f"{shown} (the run has --terminals {_show(theirs)})")
        skip |= set(_TERMINAL_OPTIONS)
    for name in sorted(set(given) - skip):
        if name not in recorded:
            continue
        kind = settings.genome_space.kind
        mine, theirs = _comparable(name, given[name], kind), _comparable(name, recorded[name], kind)
        if mine != theirs:
            conflicts.append(f"{OPTIONS[name].flag_name} {_show(mine)} (the run has {_show(theirs)})")
    return conflicts


def check_resume(given: Mapping[str, Any], settings: SearchSettings, space: str | None, run: str | Path,
                 honoured: Iterable[str] = ()) -> None:
    """ConfigError naming every option given to a resume of ``run`` that differs from its recorded ``settings``
    (:func:`resume_conflicts`); an option given with the run's own value is accepted."""
    conflicts = resume_conflicts(given, settings, space, honoured)
    if conflicts:
        raise ConfigError(f"--resume continues {run} with the settings it recorded, and these options differ: "
                          f"{'; '.join(conflicts)}; leave them out, or start a new run with another --out")


def resume_search(out: str | Path, values: Mapping[str, Any], given: Iterable[str],
                  executor: Executor | None = None,
                  on_checkpoint: Callable | None = None) -> dict:
    """Continue the search in ``out`` with its recorded settings, as ``autoprox search --resume`` does; returns
    the content of ``best.json``.

    ``values``: every option's value (:func:`~autoprox.search.options.option_values`); ``given``: the names of
    those given (not defaulted), each of which must agree with the run (:func:`check_resume`) unless it is a
    session option. The session settings given (:func:`~autoprox.search.options.session_options`) are the
    engine's to apply: ``bench`` (the same file elsewhere), ``workers`` and ``cache_dir`` for this session, and
    ``iterations``, the run's new total; the other session options (``quiet``, ``scheduler``) say how this
    process runs.
    """
    from autoprox.search.engine import run_search

    settings, space = recorded_settings(out)
    chosen = {name: values[name] for name in given if name in values and values[name] is not None}
    check_resume(chosen, settings, space, out)
    RunDirectory(out).log()  # a bad line is named now, not after the statistics are loaded or computed
    session = {option.name: chosen[option.name] for option in session_options() if option.name in chosen}
    if isinstance(session.get("bench"), tuple):
        session["bench"] = list(session["bench"])
    return run_search(None, out, resume=True, quiet=values.get("quiet", False), session=session, executor=executor,
                      on_checkpoint=on_checkpoint)


def _terminal_sets(given: Mapping[str, Any]) -> tuple[str, ...]:
    """The terminal sets ``terminals`` and the flags ``arch_terminals``, ``spread_terminals`` make together."""
    chosen = list(given.get("terminals") or PAPER_TERMINALS)
    chosen += [name for name, flag in (("arch", "arch_terminals"), ("spread", "spread_terminals")) if given.get(flag)]
    return check_terminals(chosen)


def _comparable(name: str, value: Any, kind: str) -> Any:
    """A value as it is compared with a run's recorded one (``kind``: the genome kind the run searches)."""
    if name == "seed_proxies":
        return seed_genomes(value, kind=kind)
    if name == "aggregation":
        return aggregation_names(value)
    if name == "fitness":
        return parse_fitness(value).name
    if isinstance(value, list):
        return tuple(value)
    return value


def _show(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value)) or "none"
    if isinstance(value, dict):
        return ",".join(f"{k}={v:g}" for k, v in value.items()) or "none"
    return str(value)


__all__ = ["check_resume", "resume_conflicts", "resume_search"]
