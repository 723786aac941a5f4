"""The tables of docs/results-new-space.md (leave-one-space-out: two ViT spaces, the N-space protocol), from the
committed ``runs/leave-space-out/*/protocol.json`` files (``autoprox evaluate --leave-space-out``).

Plain JSON and the standard library only, as :mod:`docs_tables`, which registers these tables.
"""

from __future__ import annotations

from typing import Callable

#: The committed leave-one-space-out protocols, each a row of the levers table, in its order.
CROSS_PROTOCOLS = [f"leave-space-out/{name}" for name in (
    "template-mean", "template-gene", "template-sum", "template-sum-parsimony", "template-sum-anchored",
    "template-sum-spread", "template-sum-sizefree-anchored", "template-sum-zoo", "template-sum-zoo-anchored")]
#: The protocols shown in full (all baselines, and Kendall per target): table name -> protocol directory.
FULL_TABLES = {
    "cross-space-sum": "leave-space-out/template-sum",
    "cross-space-zoo": "leave-space-out/template-sum-zoo",
}
#: The overview of every committed protocol, one row each (the levers side by side).
LEVERS_TABLE = "cross-space-levers"

SPACE_NAMES = {"autoformer": "AutoFormer", "pit": "PiT"}

#: How the tables name each method.
LABELS = {"params": "parameter count", "flops": "MACs", "autoprox_a": "autoprox_a (paper, AutoFormer)",
          "autoprox_p": "autoprox_p (paper, PiT)", "coarse": "best descriptor, chosen on the other space",
          "blend": "descriptor blend, fitted on the other space",
          "blend-own": "descriptor blend fitted on this space's own labels (reference, uses them)"}


def _num(value, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def _difference(diff: dict, seeds: int) -> str:
    interval = diff.get("interval") or {}
    low, high = interval.get("low"), interval.get("high")
    cell = f"{_num(diff['difference'], True)} [{_num(low, True)}, {_num(high, True)}]"
    return f"{cell} {diff['seeds_ahead']}/{seeds}"


def _scored(search: dict) -> bool:
    """Whether the protocol scored this search: it has scores, or, in a protocol.json trimmed beside its
    archive (``scripts/runs_archive.py``, which keeps no per-architecture scores), it has a genome."""
    return bool(search.get("scores")) or ("scores" not in search and bool(search.get("genome")))


def iterations_run(protocol: dict) -> str:
    """How many iterations each direction's searches ran (each search's record in ``protocol.json``)."""
    parts = []
    for direction in protocol["directions"]:
        counts = sorted({s["iteration"] for s in direction["searches"] if _scored(s)})
        name = SPACE_NAMES.get(direction["left_out"], direction["left_out"])
        parts.append(f"{name} left out: {'/'.join(map(str, counts)) or 'none'}")
    return "iterations run per search: " + "; ".join(parts)


def describe(protocol: dict) -> str:
    """One line: the configuration and the size it was run at."""
    settings = protocol["settings"]
    genome = settings.get("genome") or {}
    evolution = settings["evolution"]
    spec = protocol["protocol"]
    aggregations = "+".join(a.replace("block_", "") for a in genome.get("aggregations", ["block_mean"]))
    extras = [name for name, on in (("arch terms", genome.get("arch_terminals")),
                                    ("spread terms", genome.get("spread_terminals")),
                                    ("zoo terms", "zoo" in (genome.get("terminals") or ())),
                                    ("parsimony", evolution.get("parsimony"))) if on]
    if genome.get("operators"):
        extras.append(f"{len(genome['operators'])} operators (no size-dependent ones)")
    fitness = settings.get("fitness", "jcm")
    if fitness != "jcm":
        extras.append(f"fitness {fitness} (the left-out space ranked the same way)")
    return (f"{genome.get('kind', 'template')}, {aggregations}{''.join(', ' + e for e in extras)}; "
            f"population {evolution['population_size']}, retry cap {evolution.get('retry_cap', 20)}, "
            f"{spec['seeds']} seeds per direction, evaluation {settings.get('evaluation', 'exact')}, "
            f"{spec['bootstrap']} bootstrap resamples")


def cross_table(protocol: dict, iterations: str = "") -> list[str]:
    """Per method, the JCM on each left-out space and the searched proxy's paired difference against it."""
    summary = protocol["summary"]
    spaces = [d["left_out"] for d in protocol["directions"]]
    head = ["method (labels it used)"]
    for space in spaces:
        trained = next(d["trained_on"] for d in protocol["directions"] if d["left_out"] == space)
        name = SPACE_NAMES.get(space, space)
        others = "+".join(SPACE_NAMES.get(s, s) for s in trained)
        head += [f"{name} JCM (searched on {others})", f"{name}: searched - it [95%] seeds ahead"]
    rows = [["searched proxy (the other space's labels), mean +- sd over seeds (min to max)"]]
    for space in spaces:
        searched = summary[space].get("searched") or {}
        rows[0] += [f"{_num(searched.get('jcm_mean'))} +- {_num(searched.get('jcm_sd'))} "
                    f"({_num(searched.get('jcm_min'))} to {_num(searched.get('jcm_max'))})", ""]
    methods = list(summary[spaces[0]].get("differences") or {})
    for method in methods:
        row = [LABELS.get(method, f"{method} (zoo, none)")]
        for space in spaces:
            diff = (summary[space].get("differences") or {}).get(method)
            row += ["n/a", "n/a"] if diff is None else [_num(diff["jcm"]), _difference(diff, summary[space]["seeds"])]
        rows.append(row)
    invalid = sorted({name for d in protocol["directions"] for name in ((d.get("baselines") or {}).get("invalid") or {})})
    lines = [f"Configuration: {describe(protocol)}; {iterations}. JCM over {', '.join(protocol['targets'])} on all the "
             "left-out space's architectures.", ""] + _table(head, rows)
    if invalid:
        lines += ["", f"Could not score: {', '.join(invalid)} (protocol.json says why)."]
    return lines


def per_target_table(protocol: dict) -> list[str]:
    """Kendall per target of the searched proxy (mean over seeds) and of the main baselines, per left-out space."""
    summary = protocol["summary"]
    targets = protocol["targets"]
    rows = []
    for direction in protocol["directions"]:
        space = direction["left_out"]
        figures = summary[space]["figures"]
        searched = summary[space].get("searched") or {}
        name = SPACE_NAMES.get(space, space)
        rows.append([name, "searched (mean over seeds)"] + [_num(searched.get("kendall_mean", {}).get(t))
                                                            for t in targets])
        for method in ("params", "blend", "blend-own"):
            if method in figures:
                rows.append([name, LABELS[method]] + [_num(figures[method]["kendall"].get(t)) for t in targets])
    return _table(["left out", "method"] + targets, rows)


def levers_table(protocols: dict[str, dict]) -> list[str]:
    """One row per committed protocol: each left-out space's searched JCM (mean +- sd over seeds), its paired
    difference against the parameter count with the bootstrap interval and the seeds ahead, and the mean of
    both directions' searched JCMs (what benchmarks/recommend_any.py ranks configurations by)."""
    rows, spaces = [], []
    for relative, protocol in protocols.items():
        summary = protocol["summary"]
        spaces = spaces or [d["left_out"] for d in protocol["directions"]]
        row = [f"`{relative.split('/')[-1]}`: {describe(protocol).split(';')[0]}"]
        means = []
        for space in spaces:
            searched = summary[space].get("searched") or {}
            diff = (summary[space].get("differences") or {}).get("params")
            means.append(searched.get("jcm_mean"))
            row += [f"{_num(searched.get('jcm_mean'))} +- {_num(searched.get('jcm_sd'))}",
                    "n/a" if diff is None else _difference(diff, summary[space]["seeds"])]
        row.append(_num(sum(means) / len(means)) if None not in means else "n/a")
        rows.append(row)
    if protocols:  # the bar every row is measured against, the same in every protocol
        summary = next(iter(protocols.values()))["summary"]
        params = [(summary[space].get("figures") or {}).get("params", {}).get("jcm") for space in spaces]
        rows.append(["*the parameter count (no label)*"] + [x for value in params for x in (_num(value), "")]
                    + [_num(sum(params) / len(params)) if None not in params else "n/a"])
    head = ["configuration (5 seeds per direction)"]
    for space in spaces:
        name = SPACE_NAMES.get(space, space)
        head += [f"{name} left out: JCM", f"{name}: - params [95%] seeds ahead"]
    return _table(head + ["mean of both"], rows)


#: The committed N-space protocol (``evaluate --leave-space-out --rank-formulas``), relative to runs/.
SPACE_PROTOCOL = "space-protocol"
SPACE_BASELINES = ("params", "flops", "lrsum-all")
#: The N-space protocols' tables: name -> the protocol each reads (relative to runs/).
SPACE_TABLES = {"space-protocol": SPACE_PROTOCOL, "space-protocol-mean": SPACE_PROTOCOL + "-mean",
                "space-protocol-skip-worst": SPACE_PROTOCOL + "-skip-worst",
                "space-protocol-skip-mean": SPACE_PROTOCOL + "-skip-mean",
                "space-protocol-margin": SPACE_PROTOCOL + "-margin",
                "space-protocol-skip-margin": SPACE_PROTOCOL + "-skip-margin",
                "space-protocol-skip-worst-100": SPACE_PROTOCOL + "-skip-worst-100"}
#: The formula tables: name -> the protocol whose formulas each lists.
SPACE_FORMULA_TABLES = {"space-protocol-formulas": SPACE_PROTOCOL,
                        "space-protocol-skip-formulas": SPACE_PROTOCOL + "-skip-mean",
                        "space-protocol-margin-formulas": SPACE_PROTOCOL + "-margin"}


def _space_paired(pair: dict | None, seeds: int) -> str:
    if not pair:
        return "-"
    return f"{_num(pair['difference'], True)} [{_num(pair['low'], True)}, {_num(pair['high'], True)}] {pair['seeds_ahead']}/{seeds}"


def _summary_mean(row: dict, spaces: int) -> str:
    """A baseline's mean over the left-out spaces, with how many it was scored on when not all ``spaces``."""
    return _num(row["mean"], True) + ("" if row["spaces"] == spaces else f" ({row['spaces']} spaces)")


def space_protocol_table(protocol: dict) -> list[str]:
    """Per left-out space of the N-space protocol: the searched formulas (mean +- sd over seeds), the label-free
    baselines, the choices made on the training spaces, and the paired intervals against each baseline."""
    head = ["left out", "rows", "searched (mean +- sd)", "params", "flops", "lrsum-all", "best-single", "greedy-lrsum",
            "searched - params [95%] seeds ahead", "- flops", "- lrsum-all"]
    rows = []
    for space, d in protocol["directions"].items():
        rows_count = sum(t["rows"] for t in protocol["spec"]["tables"][space])
        seeds = len(d["searched"])
        figures = d["figures"]
        rows.append([space, f"{rows_count:,}", f"{_num(d['searched_mean'], True)} +- {_num(d['searched_sd'])}",
                     *(_num(figures[name], True) if name in figures else "-" for name in
                       ("params", "flops", "lrsum-all", "best-single", "greedy-lrsum")),
                     *(_space_paired(d["paired"].get(name), seeds) for name in SPACE_BASELINES)])
    summary = protocol.get("summary", {})
    if summary:
        def mean(name: str) -> str:
            return _summary_mean(summary[name], len(protocol["directions"])) if summary.get(name) else "-"
        rows.append(["mean", "", mean("searched"), *(mean(n) for n in ("params", "flops", "lrsum-all", "best-single",
                                                                        "greedy-lrsum")), "", "", ""])
    return _table(head, rows)


def space_protocol_formulas(protocol: dict) -> list[str]:
    """Each left-out space's searched formulas (one per seed) and the choices made on its training spaces."""
    head = ["left out", "seed", "formula", "left-out figure", "worst training figure"]
    rows = []
    for space, d in protocol["directions"].items():
        for s in d["searched"]:
            rows.append([space, str(s["seed"]), f"`{s['formula']}`", _num(s["figure"], True),
                         _num(min(s["training"].values()), True)])
        for name, formula in d["chosen_on_training"].items():
            rows.append([space, name, f"`{formula}`", _num(d["figures"][name], True), ""])
    return _table(head, rows)


#: The per-space levers table: every N-space protocol's searched formulas against the size counts.
SPACE_LEVERS_TABLE = "space-protocol-levers"


def space_levers_table(protocols: dict[str, dict]) -> list[str]:
    """One row per N-space protocol (its objective, missing-column policy and iterations): on each left-out
    space the searched formulas' paired difference against ``params`` (interval, seeds ahead) and against
    ``flops``, and the mean searched figure over the left-out spaces; then the size counts themselves."""
    rows, spaces = [], []
    for relative, protocol in protocols.items():
        spaces = spaces or list(protocol["directions"])
        settings = protocol["spec"]["settings"]
        size = (f"{settings['iterations']} iterations" if "iterations" in settings  # else a generational search's
                else f"{settings['generations']} generations")
        row = [f"`{relative}`: {settings['objective']}, {settings.get('missing', 'neutral')}, {size}"]
        for space in spaces:
            d = protocol["directions"][space]
            seeds = len(d["searched"])
            flops = d["paired"].get("flops")
            row.append(_space_paired(d["paired"].get("params"), seeds)
                       + (f" (flops {_num(flops['difference'], True)})" if flops else ""))
        row.append(_num(protocol["summary"]["searched"]["mean"], True))
        rows.append(row)
    if protocols:
        summary = next(iter(protocols.values()))["summary"]
        for name in ("params", "flops"):
            row = summary[name]
            rows.append([f"*{name} (no label)*"] + [_num(row["per_space"][s], True) if s in row["per_space"] else "-"
                                                     for s in spaces]
                        + [_summary_mean(row, len(spaces))])
    return _table(["protocol (5 seeds per left-out space)"] + [f"{s}: searched - params [95%] seeds ahead"
                                                               for s in spaces] + ["mean searched"], rows)


#: The in-sample ceiling (``benchmarks/space_ceiling.py``), relative to runs/, and its table.
SPACE_CEILING = "space-ceiling/ceiling.json"
SPACE_CEILING_TABLE = "space-ceiling"


def _nearer(entry: dict) -> dict:
    """The paired interval against the size count (``params`` or ``flops``) the formula leads by less."""
    return min((entry[key] for key in ("vs_params", "vs_flops") if key in entry), key=lambda p: p["difference"])


def _ceiling_cell(entry: dict) -> str:
    """A space's lead of the in-sample formula over its better size count, the interval against that count,
    and whether that space's labels were read (in) or not (out)."""
    nearer = _nearer(entry)
    where = "in" if entry["labels_read"] else "**out**"
    return f"{_num(entry['lead'], True)} [{_num(nearer['low'], True)}, {_num(nearer['high'], True)}] {where}"


def space_ceiling_table(ceiling: dict) -> list[str]:
    """Per set of spaces whose labels the search read: the formula with the best worst lead over them, its lead
    over each space's better size count (interval against the nearer of ``params`` and ``flops``; ``in`` where
    the labels were read, ``out`` on the space left out of the set), and on how many spaces it beats both
    counts with the interval clear of zero."""
    spaces = list(ceiling["sets"][0]["per_space"])
    rows = []
    for record in ceiling["sets"]:
        per_space = record["per_space"]
        ahead = sum(e["lead"] > 0 for e in per_space.values())
        clear = sum(_nearer(e)["low"] > 0 for e in per_space.values())
        left_out = [s for s in spaces if s not in record["spaces"]]
        rows.append([f"all but {left_out[0]}" if left_out else "all five", f"`{record['formula']}`",
                     *(_ceiling_cell(per_space[s]) for s in spaces), f"{ahead} / {clear}"])
    return _table(["labels read", "formula (best worst lead over them)"]
                  + [f"{s}: lead over size [95%]" for s in spaces] + ["spaces ahead / clear of zero"], rows)


def tables() -> dict[str, tuple[str, Callable]]:
    """The tables to register: ``{name: ("results", builder)}`` for each committed protocol."""
    made = {}
    for name, relative in FULL_TABLES.items():
        made[name] = ("results", lambda r, relative=relative: cross_table(
            r.json(f"{relative}/protocol.json"), iterations_run(r.json(f"{relative}/protocol.json"))))
        made[f"{name}-targets"] = ("results", lambda r, relative=relative: per_target_table(
            r.json(f"{relative}/protocol.json")))
    for name, relative in SPACE_TABLES.items():
        made[name] = ("results", lambda r, relative=relative: space_protocol_table(r.json(f"{relative}/protocol.json")))
    for name, relative in SPACE_FORMULA_TABLES.items():
        made[name] = ("results", lambda r, relative=relative: space_protocol_formulas(
            r.json(f"{relative}/protocol.json")))
    made[SPACE_LEVERS_TABLE] = ("results", lambda r: space_levers_table(
        {f"runs/{relative}": r.json(f"{relative}/protocol.json") for relative in SPACE_TABLES.values()}))
    made[SPACE_CEILING_TABLE] = ("results", lambda r: space_ceiling_table(r.json(SPACE_CEILING)))
    made[LEVERS_TABLE] = ("results", lambda r: levers_table(
        {relative: r.json(f"{relative}/protocol.json") for relative in CROSS_PROTOCOLS}))
    return made
