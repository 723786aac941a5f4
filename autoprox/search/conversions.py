"""The conversions of the option table (:mod:`autoprox.search.options`): each checks a value of one option and
brings it to its canonical form.

A conversion accepts what a user types (a string) and what a Python caller passes (numbers, sequences,
mappings), and raises :class:`~autoprox.core.errors.ConfigError` with one line. Each says, as its
``recorded`` attribute, what its value looks like in ``config.json``
(:meth:`autoprox.search.options.Option.is_recorded`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from autoprox.core.errors import ConfigError, GenomeError
from autoprox.genome.terminals import check_terminals
from autoprox.genome.aggregations import AGGREGATION_REGISTRY
from autoprox.genome.space import AGGREGATIONS, DEFAULT_AGGREGATION

Convert = Callable[[Any], Any]


def recorded_as(check: Callable[[Any], bool]) -> Callable[[Convert], Convert]:
    """Mark a conversion with the check of its value as ``config.json`` records it."""
    def mark(convert: Convert) -> Convert:
        convert.recorded = check
        return convert
    return mark


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_str(value: Any) -> bool:
    return isinstance(value, str)


def list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """The check of a JSON list whose items each pass ``check``."""
    return lambda value: isinstance(value, list) and all(check(v) for v in value)


def number_mapping(value: Any) -> bool:
    """Whether ``value`` is a JSON object of numbers (weights)."""
    return isinstance(value, Mapping) and all(isinstance(k, str) and is_number(w) for k, w in value.items())


def sequence(value: Any) -> Iterable:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ConfigError(f"expected a list, got {value!r}"[:200])
    return value


def integer(minimum: int | None = None, maximum: int | None = None) -> Convert:
    """An integer of at least ``minimum`` and at most ``maximum`` (None: no bound). A recorded value is checked
    against the minimum alone: a run an earlier version recorded above a bound added since stays readable."""
    @recorded_as(lambda value: is_int(value) and (minimum is None or value >= minimum))
    def convert(value: Any) -> int:
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise ConfigError(f"expected an integer, got {value!r}"[:200]) from None
        if not is_int(value):
            raise ConfigError(f"expected an integer, got {value!r}"[:200])
        if minimum is not None and value < minimum:
            raise ConfigError(f"expected at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise ConfigError(f"expected at most {maximum:,}, got {value:,}")
        return value
    return convert


def number(low: float | None = None, high: float | None = None, low_open: bool = False) -> Convert:
    """A finite number in ``[low, high]`` (``(low, high]`` with ``low_open``): NaN and infinities are refused."""
    @recorded_as(is_number)
    def convert(value: Any) -> float:
        given = value
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise ConfigError(f"expected a number, got {value!r}"[:200]) from None
        if not is_number(value) or not math.isfinite(value):
            raise ConfigError(f"expected a finite number, got {given!r}"[:200])
        below = low is not None and (value <= low if low_open else value < low)
        if below or (high is not None and value > high):
            interval = f"{'(' if low_open else '['}{low if low is not None else '-inf'}, {high if high is not None else 'inf'}]"
            raise ConfigError(f"expected a number in {interval}, got {value}")
        return float(value)
    return convert


def text() -> Convert:
    @recorded_as(is_str)
    def convert(value: Any) -> str:
        if not isinstance(value, str):
            raise ConfigError(f"expected a string, got {value!r}"[:200])
        return value
    return convert


def input_text() -> Convert:
    """A minibatch as ``--input`` names it (``gaussian``, ``ones``, ``images:DIR``), checked as the statistics read
    it (:meth:`autoprox.networks.statistics.InputSpec.parse`), so that a bad one is named with its option."""
    @recorded_as(is_str)
    def convert(value: Any) -> str:
        from autoprox.core.errors import InputSpecError
        from autoprox.networks.statistics import InputSpec

        text_value = text()(value)
        try:
            InputSpec.parse(text_value)
        except InputSpecError as exc:
            raise ConfigError(str(exc)) from None
        return text_value
    return convert


def path_text() -> Convert:
    """A path typed as text: a string that is not empty (an empty ``--out ''`` is a slip, not a request for the
    default, which leaving the option out gives)."""
    @recorded_as(is_str)
    def convert(value: Any) -> str:
        value = text()(value)
        if not value.strip():
            raise ConfigError("an empty path; give one, or leave the option out for its default")
        return value
    return convert


def distinct(items: Sequence[Any], shown: Callable[[Any], str] = str) -> tuple:
    """``items`` as a tuple: the one rule of every list option (a comma list on the command line, a sequence in
    Python). ConfigError for an empty list (leaving the option out gives its default; an empty one is not
    read as it) or an item given twice (named as ``shown`` gives it)."""
    items = tuple(items)
    if not items:
        raise ConfigError("an empty list; give at least one value, or leave the option out for its default")
    seen: set = set()
    for item in items:
        if item in seen:
            raise ConfigError(f"{shown(item)} is given twice; give each once")
        seen.add(item)
    return items


def comma_parts(value: str) -> list[str]:
    """The parts of a comma list, stripped, empty parts left out (``"a, b,"`` is a and b)."""
    return [part.strip() for part in value.split(",") if part.strip()]


def text_list() -> Convert:
    """A comma list (``"a,b"``) or a sequence of strings, as a tuple: at least one, none twice (:func:`distinct`)."""
    @recorded_as(list_of(is_str))
    def convert(value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            return distinct(comma_parts(value))
        items = tuple(sequence(value))
        if not all(isinstance(item, str) for item in items):
            raise ConfigError(f"expected strings, got {value!r}"[:200])
        return distinct(items)
    return convert


def one_or_several() -> Convert:
    """One string, or several (a sequence of two or more) as a tuple; one in a sequence is that string."""
    @recorded_as(lambda value: is_str(value) or (list_of(is_str)(value) and len(value) >= 2))
    def convert(value: Any) -> str | tuple[str, ...]:
        if isinstance(value, (str, Path)):
            return str(value)
        items = tuple(str(item) if isinstance(item, Path) else text()(item) for item in sequence(value))
        if not items:
            raise ConfigError("expected at least one value")
        return items[0] if len(items) == 1 else items
    return convert


def integer_list(minimum: int | None = None) -> Convert:
    """A comma list (``"0,1"``) or a sequence of integers of at least ``minimum``, as a tuple: at least one, none
    twice (:func:`distinct`)."""
    @recorded_as(list_of(lambda value: is_int(value) and (minimum is None or value >= minimum)))
    def convert(value: Any) -> tuple[int, ...]:
        parts = comma_parts(value) if isinstance(value, str) else list(sequence(value))
        return distinct(integer(minimum)(part) for part in parts)
    return convert


def weights() -> Convert:
    """``c100_kd=2,flower_kd=1`` (at least one, no target twice: :func:`distinct`) or a mapping of target to a
    finite weight of at least 0."""
    @recorded_as(number_mapping)
    def convert(value: Any) -> dict[str, float]:
        if isinstance(value, str):
            pairs = []
            for part in comma_parts(value):
                key, sep, weight = part.partition("=")
                if not sep or not key:
                    raise ConfigError(f"weights look like c100_kd=1,flower_kd=0.5; got {part!r}"[:200])
                pairs.append((key.strip(), weight))
            distinct([key for key, _ in pairs])
        elif isinstance(value, Mapping):
            pairs = list(value.items())
        else:
            raise ConfigError(f"expected a mapping of target to weight, got {value!r}"[:200])
        try:
            return {str(key): number(0.0)(weight) for key, weight in pairs}
        except ConfigError as exc:
            raise ConfigError(f"a weight must be a finite number, at least 0 ({exc})") from None
    return convert


def proxies() -> Convert:
    """A comma list of proxies split at top-level commas only (genome strings hold commas), or a sequence."""
    @recorded_as(list_of(is_str))
    def convert(value: Any) -> tuple[str, ...]:
        from autoprox.proxies.proxy_input import split_proxy_list

        if isinstance(value, str):
            return distinct(part.strip() for part in split_proxy_list(value) if part.strip())
        return text_list()(value)
    return convert


_COUNT_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")

#: ``--aggregation``'s default: the genome space's, as the option writes it (``mean``).
DEFAULT_AGGREGATION_OPTION = DEFAULT_AGGREGATION.removeprefix("block_")


def gene_aggregations() -> str:
    """What ``gene`` stands for, in words: ``all four, chosen by evolution`` (the aggregations registered now)."""
    count = len(AGGREGATIONS)
    return f"all {_COUNT_WORDS[count] if count < len(_COUNT_WORDS) else count}, chosen by evolution"


def aggregation_help() -> str:
    """``--aggregation``'s help: the aggregations registered now, each by its short name and note."""
    names = [f"{name.removeprefix('block_')} ({entry.note})" if entry.note else name.removeprefix("block_")
             for name, entry in AGGREGATION_REGISTRY.items()]
    return f"over blocks: {', '.join(names)}, a comma list, or gene ({gene_aggregations()})"


def aggregation(value: Any) -> str:
    """Over blocks: one name, a comma list, ``gene``, or a sequence of names, as one comma string: at least one,
    none twice (``mean`` and ``block_mean`` are one), ``gene`` alone."""
    parts = text_list()(value)
    short = [part.removeprefix("block_") for part in parts]
    if "gene" in short and len(short) > 1:
        raise ConfigError(f"gene stands alone ({gene_aggregations()}): give gene or a comma list of "
                          f"{', '.join(name.removeprefix('block_') for name in AGGREGATIONS)}")
    distinct(short)
    return value if isinstance(value, str) else ",".join(parts)


def check_aggregation(value: str) -> None:
    """ConfigError naming an aggregation of ``value`` (an ``aggregation`` option's value) that is not registered,
    as it was typed (``nosuch``, where the genome space would name ``block_nosuch``), with the ones that are.
    Checked when the genome space is made, not by the conversion: one registered after the option is set counts."""
    for part in (p.strip() for p in value.split(",") if p.strip()):
        if part != "gene" and f"block_{part.removeprefix('block_')}" not in AGGREGATIONS:
            known = ", ".join(name.removeprefix("block_") for name in AGGREGATIONS)
            raise ConfigError(f"aggregation {part!r} is unknown: the aggregations over blocks are {known} "
                              f"(one, a comma list, or gene for {gene_aggregations()})")


def aggregation_names(value: str) -> tuple[str, ...]:
    """The aggregations an ``aggregation`` value stands for, with their ``block_`` prefix (ConfigError naming one
    that is not registered, as typed: :func:`check_aggregation`)."""
    check_aggregation(value)
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if parts == ["gene"]:
        return tuple(AGGREGATIONS)
    return tuple(p if p.startswith("block_") else f"block_{p}" for p in parts)


def operator_list(value: Any) -> tuple[str, ...]:
    """A comma list or sequence of registered operation names; ``paper`` stands for the paper's 28."""
    from autoprox.primitives import PAPER_OPERATORS

    names = text_list()(value)
    expanded: list[str] = []
    for name in names:
        for operator in PAPER_OPERATORS if name == "paper" else [name]:
            if operator in expanded:
                raise ConfigError(f"{operator} is given twice (paper holds it); give each once")
            expanded.append(operator)
    return tuple(expanded)


def check_operator_list(operators: Sequence[str]) -> None:
    """ConfigError naming the ``operators`` option and its value as typed when one is not registered (with the
    ones that are), one is given twice, or no unary or no binary one is. Checked when the genome space is made,
    not by the conversion: a primitive registered after the option is set counts."""
    from autoprox.primitives import PRIMITIVES, check_operators

    try:
        check_operators(tuple(operators))
    except ValueError as exc:
        missing = [name for name in operators if name not in PRIMITIVES]
        said = (f"{exc}; the operators are paper (the paper's) or of {', '.join(PRIMITIVES)}" if missing
                else f"{','.join(operators)!r}: {exc}")
        raise ConfigError(f"operators: {said}"[:900]) from None


def terminal_list(value: Any) -> tuple[str, ...]:
    """A comma list or sequence of terminal-set names (:data:`autoprox.genome.terminals.TERMINAL_SETS`),
    checked and in registration order."""
    try:
        return check_terminals(text_list()(value))
    except GenomeError as exc:
        raise ConfigError(str(exc)) from None


__all__ = ["DEFAULT_AGGREGATION_OPTION", "Convert", "aggregation", "aggregation_help", "aggregation_names", "check_aggregation", "check_operator_list", "comma_parts", "distinct", "gene_aggregations", "input_text", "integer",
           "integer_list", "is_int", "is_number", "is_str",
           "list_of", "number", "number_mapping", "one_or_several", "operator_list", "proxies", "recorded_as",
           "sequence", "terminal_list", "text", "text_list", "weights"]
