"""The figures of an HTML report, drawn with Matplotlib (Agg) and returned as inline SVG text.

Every figure is a plain function of numbers already read from a run or a protocol; it
returns the ``<svg>`` element as a string, with its text drawn as paths (the page needs
no font) and its element ids prefixed so that many figures can share one HTML document.
Formulas are drawn with Matplotlib's mathtext from the LaTeX the formula printer gives.
"""

from __future__ import annotations

import io
import math
import re
from typing import Mapping, Sequence

from autoprox.core.numbers import format_float

#: Colours of the report (Matplotlib's default cycle, named for what they stand for).
BEST, MEAN, REFERENCE, SEARCH, TEST = "C0", "C1", "0.45", "C0", "C3"

_RC = {"svg.fonttype": "path", "svg.hashsalt": "autoprox", "font.size": 9, "axes.titlesize": 10,
       "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3}
_ID = re.compile(r'\bid="([^"]+)"')


def svg_of(figure, prefix: str) -> str:
    """The ``<svg>`` element of a Matplotlib figure, its ids prefixed with ``prefix`` (unique per page)."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", bbox_inches="tight", pad_inches=0.05)
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    ids = _ID.findall(text)
    for name in sorted(set(ids), key=len, reverse=True):
        new = f"{prefix}-{name}"
        text = (text.replace(f'id="{name}"', f'id="{new}"').replace(f'"#{name}"', f'"#{new}"')
                .replace(f"url(#{name})", f"url(#{new})"))
    return text.strip()


def _figure(width: float, height: float, rows: int = 1, columns: int = 1, **kwargs):
    """A figure on the Agg canvas, with the report's style, and its axes."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        figure = Figure(figsize=(width, height), layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.subplots(rows, columns, squeeze=False, **kwargs)
    return figure, axes


def _finite(values: Sequence) -> list[float]:
    return [math.nan if v is None or not isinstance(v, (int, float)) else float(v) for v in values]


def _wrapped(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def rolling_mean(values: Sequence[float], window: int) -> list[float]:
    """The mean of the finite values among the last ``window`` (NaN where there is none)."""
    means = []
    for end in range(1, len(values) + 1):
        finite = [v for v in values[max(0, end - window):end] if math.isfinite(v)]
        means.append(sum(finite) / len(finite) if finite else math.nan)
    return means


def curves_figure(iterations: Sequence[int], best: Sequence[float], mean: Sequence[float], reference: float | None,
               kendall: Mapping[str, Sequence[float]], evaluated_at: Sequence[int], valid_share: Sequence[float],
               distinct: Sequence[int], fitness: str, distinct_at: Sequence[int] | None = None,
               notes: Mapping[str, str] | None = None):
    """Evolution curves: best and mean fitness (with the parameter count's as a dotted line), the
    best proxy's Kendall per target, and per iteration the share of valid genomes evaluated and
    the distinct genomes evaluated so far (at ``distinct_at``, default ``evaluated_at``).

    ``notes``: for a lower panel the run kept no numbers for (``valid``, ``distinct``), why; it is
    written across the empty axes rather than leaving them blank (``valid_title``: another title of
    the valid-share panel, when its numbers count something else). The upper panels' legends stand to
    the right of their axes, where no curve runs through a label (a target's name was hidden by the
    lines drawn under it). Returns the Matplotlib figure (:func:`curves_svg` draws it as SVG)."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        figure, axes = _figure(10, 6.2, 2, 2, sharex=True)
        (fit_ax, tau_ax), (valid_ax, distinct_ax) = axes
        fit_ax.plot(iterations, _finite(best), color=BEST, lw=2, label="best")
        fit_ax.plot(iterations, _finite(mean), color=MEAN, lw=1.2, ls="--", label="population mean")
        if reference is not None:
            fit_ax.axhline(reference, color=REFERENCE, lw=1, ls=":", label=f"parameter count ({format_float(reference)})")
        fit_ax.set_title(f"fitness ({fitness}, search split)")
        for index, (target, values) in enumerate(kendall.items()):
            tau_ax.plot(iterations, _finite(values), color=f"C{index % 10}", lw=1.5, label=target)
        tau_ax.set_title("the best proxy's Kendall tau per target (search split)")
        shares = _finite(valid_share)
        valid_ax.plot(evaluated_at, shares, color="C2", lw=0.8, alpha=0.45, marker="." if len(shares) < 40 else None,
                      label="per iteration")
        if len(shares) >= 20:
            valid_ax.plot(evaluated_at, rolling_mean(shares, 10), color="C2", lw=2, label="mean of the last 10")
            valid_ax.legend(fontsize=8, loc="lower right")
        valid_ax.set_ylim(-0.03, 1.03)
        valid_ax.set_title((notes or {}).get("valid_title") or "share of the genomes evaluated that are valid")
        distinct_ax.plot(evaluated_at if distinct_at is None else distinct_at, list(distinct), color="C4", lw=1.5)
        distinct_ax.set_title("distinct genomes evaluated so far")
        for axis, key in ((valid_ax, "valid"), (distinct_ax, "distinct")):
            if (notes or {}).get(key):
                axis.text(0.5, 0.5, _wrapped(notes[key], 48), transform=axis.transAxes, ha="center", va="center",
                          fontsize=8.5, color="0.35")
                axis.set_yticks([])
        for axis in (valid_ax, distinct_ax):
            axis.set_xlabel("iteration (0: initial population)")
        for axis in (fit_ax, tau_ax):
            axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
        return figure


def curves_svg(iterations: Sequence[int], best: Sequence[float], mean: Sequence[float], reference: float | None,
               kendall: Mapping[str, Sequence[float]], evaluated_at: Sequence[int], valid_share: Sequence[float],
               distinct: Sequence[int], fitness: str, prefix: str, distinct_at: Sequence[int] | None = None,
               notes: Mapping[str, str] | None = None) -> str:
    """:func:`curves_figure` as an inline SVG whose ids begin with ``prefix``."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        return svg_of(curves_figure(iterations, best, mean, reference, kendall, evaluated_at, valid_share, distinct,
                                    fitness, distinct_at=distinct_at, notes=notes), prefix)


def pareto_svg(points: Sequence[tuple[int, float]], front: Sequence[tuple[int, float]], chosen: tuple[int, float] | None,
               fitness: str, prefix: str) -> str:
    """Complexity against fitness: the hall of fame's entries, the Pareto front as a step line, the chosen proxy."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        figure, axes = _figure(5.6, 3.6)
        axis = axes[0][0]
        if points:
            axis.scatter([p[0] for p in points], [p[1] for p in points], s=22, color="0.6", label="hall of fame", zorder=2)
        if front:
            axis.plot([p[0] for p in front], [p[1] for p in front], color=BEST, marker="o", ms=5, drawstyle="steps-post",
                      lw=1.5, label="Pareto front", zorder=3)
        if chosen is not None:
            axis.scatter([chosen[0]], [chosen[1]], s=110, marker="*", color=TEST, label="chosen proxy", zorder=4)
        axis.set_xlabel("complexity (nodes of the canonical genome)")
        axis.set_ylabel(f"{fitness} (search split)")
        axis.set_title("Pareto front of complexity against fitness")
        axis.legend(fontsize=8, loc="lower right")
        return svg_of(figure, prefix)


def scatter_svg(targets: Sequence[str], panels: Mapping[str, Mapping], prefix: str) -> str:
    """Per target, the chosen proxy's score against accuracy, search and test architectures apart.

    ``panels[target]``: ``search`` and ``test``, each ``(scores, accuracies)``, and ``title``.
    """
    import matplotlib

    columns = len(targets) if len(targets) <= 3 else (2 if len(targets) == 4 else 3)
    rows = math.ceil(len(targets) / columns)
    with matplotlib.rc_context(_RC):
        figure, axes = _figure(3.5 * columns, 3.1 * rows, rows, columns)
        for index, target in enumerate(targets):
            axis = axes[index // columns][index % columns]
            panel = panels[target]
            for part, color, marker in (("search", SEARCH, "o"), ("test", TEST, "^")):
                scores, accuracies = panel.get(part) or ((), ())
                if len(scores):
                    axis.scatter(scores, accuracies, s=16, color=color, marker=marker, alpha=0.75,
                                 label=f"{part} ({len(scores)})")
            axis.set_title(panel.get("title", target), fontsize=8.5)
            axis.set_xlabel("proxy score")
            axis.set_ylabel(f"{target} accuracy")
            axis.legend(fontsize=7.5, loc="lower right")
        for index in range(len(targets), rows * columns):
            axes[index // columns][index % columns].set_visible(False)
        return svg_of(figure, prefix)


#: Bars of the beyond-size figure: (key in a beyond-size target block, label).
BEYOND_BARS = (("kendall", "proxy"), ("partial_given_params", "partial | params"),
               ("partial_given_depth", "partial | depth"))


def beyond_size_svg(blocks: Mapping[str, Mapping[str, Mapping]], prefix: str) -> str:
    """Per split and target: the proxy's Kendall, its partial Kendall given the parameter count and
    given the depth, and the bar (the best coarse descriptor's Kendall) as a black tick."""
    import matplotlib
    import numpy as np

    parts = list(blocks)
    with matplotlib.rc_context(_RC):
        figure, axes = _figure(4.3 * len(parts), 3.4, 1, len(parts), sharey=True)
        for axis, part in zip(axes[0], parts):
            block = blocks[part]
            targets = list(block)
            x = np.arange(len(targets))
            width = 0.8 / len(BEYOND_BARS)
            for index, (key, label) in enumerate(BEYOND_BARS):
                values = _finite([block[t].get(key) for t in targets])
                axis.bar(x + (index - 1) * width, values, width, color=f"C{index}", label=label)
            bars = _finite([(block[t].get("bar") or {}).get("kendall") for t in targets])
            axis.scatter(x, bars, marker="_", s=500, color="black", linewidths=2, zorder=3,
                         label="bar: best coarse descriptor")
            axis.set_xticks(x, targets, **({"rotation": 20, "ha": "right"} if len(targets) > 3 else {}))
            axis.axhline(0.0, color="0.5", lw=0.8)
            axis.set_title(f"{part} split")
            axis.set_ylabel("Kendall tau")
        handles, labels = axes[0][0].get_legend_handles_labels()
        figure.legend(handles, labels, fontsize=8, loc="outside lower center", ncol=len(labels))
        return svg_of(figure, prefix)


def forest_svg(rows: Sequence[str], baselines: Sequence[str], differences: Mapping[str, Mapping[str, Mapping]],
               prefix: str, xlabel: str = "proxy minus baseline, test Kendall (thick: 95% t-interval over folds; "
                                          "thin: corrected)") -> str:
    """A forest plot of the paired differences (proxy minus each baseline, per fold): per row (a target
    or the JCM) and baseline, the mean, the t-interval (thick) and the corrected interval (thin); a
    baseline a row lacks is left out of it. ``xlabel`` says what the intervals are."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        figure, axes = _figure(7.2, 0.55 + 0.32 * len(rows) * len(baselines) + 0.3 * len(rows))
        axis = axes[0][0]
        labels, y = [], 0.0
        for row in rows:
            for index, baseline in enumerate(baselines):
                stats = differences[row].get(baseline)
                if stats is None:
                    continue
                color = f"C{index % 10}"
                low, high = _finite(stats.get("corrected_ci") or (None, None))
                axis.plot([low, high], [y, y], color=color, lw=1.2)
                low, high = _finite(stats.get("ci") or (None, None))
                axis.plot([low, high], [y, y], color=color, lw=4, solid_capstyle="butt")
                axis.plot([_finite([stats.get("mean")])[0]], [y], "o", color="white", mec=color, mew=1.5, ms=6)
                labels.append((y, f"{row}  - {baseline}"))
                y -= 1.0
            y -= 0.6
        axis.axvline(0.0, color="0.3", lw=1)
        axis.set_yticks([p for p, _ in labels], [label for _, label in labels])
        axis.grid(True, axis="x", alpha=0.3)
        axis.grid(False, axis="y")
        axis.set_xlabel(xlabel)
        return svg_of(figure, prefix)


def k_curves_svg(panels: Mapping[str, Mapping[str, Mapping[int, float]]], prefix: str,
                 ylabel: str = "mean Kendall, held-out labelled rows") -> str:
    """Mean Kendall against the number of labelled rows k: one panel per table (``panels``: table ->
    method -> {k: mean}), one line per method in the same colour on every panel, one legend below."""
    import matplotlib

    names = list(panels)
    methods = list(dict.fromkeys(m for lines in panels.values() for m in lines))
    columns = min(3, max(1, len(names)))
    rows = math.ceil(len(names) / columns) if names else 1
    with matplotlib.rc_context(_RC):
        figure, axes = _figure(3.4 * columns, 2.6 * rows + 0.5, rows, columns)
        for index, axis in enumerate(axes.flat):
            if index >= len(names):
                axis.set_visible(False)
                continue
            for m_index, method in enumerate(methods):
                points = sorted((int(k), v) for k, v in panels[names[index]].get(method, {}).items())
                if points:
                    axis.plot([k for k, _ in points], _finite([v for _, v in points]), marker="o", ms=4, lw=1.5,
                              color=f"C{m_index % 10}", label=method)
            axis.set_title(names[index])
            axis.set_xlabel("labelled rows k")
            if index % columns == 0:
                axis.set_ylabel(ylabel)
        handles = {}
        for axis in axes.flat:
            for handle, label in zip(*axis.get_legend_handles_labels()):
                handles.setdefault(label, handle)
        if handles:
            figure.legend(list(handles.values()), list(handles), fontsize=8, loc="outside lower center",
                          ncol=len(handles))
        return svg_of(figure, prefix)


def formula_svg(latex: str, prefix: str) -> str | None:
    """A formula drawn with mathtext as SVG, or None when mathtext cannot read it (shown as text then)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC | {"mathtext.fontset": "dejavusans"}):
        figure = Figure(figsize=(0.01, 0.01))
        FigureCanvasAgg(figure)
        figure.text(0, 0, f"${latex}$", fontsize=10)
        try:
            return svg_of(figure, prefix)
        except ValueError:  # a construct mathtext does not know
            return None


__all__ = ["beyond_size_svg", "curves_figure", "curves_svg", "forest_svg", "formula_svg", "k_curves_svg", "pareto_svg",
           "scatter_svg", "svg_of"]
