"""Ensemble proxies: weighted sums of members' empirical quantiles, one plain JSON file.

An ensemble combines members of three kinds:

``{"proxy": TEXT}``
    anything :func:`~autoprox.proxies.proxy.resolve_proxy` accepts but a file (a genome
    string, ``params``, ``flops``, a zoo proxy such as ``zico``), scored by
    :meth:`Proxy.score <autoprox.proxies.proxy.Proxy.score>` with the statistics of
    ``"classes"`` classes;
``{"blend": CHOICE}``
    a descriptor blend fitted by :func:`~autoprox.proxies.baselines.fit_rank_blend`,
    scored by :func:`~autoprox.proxies.baselines.blend_scores`;
``{"descriptor": NAME}``
    one column of :func:`~autoprox.spaces.descriptors.descriptor_columns`.

Each member carries a ``weight`` and a ``reference``: its sorted raw scores on the
architectures it was fitted on. Its contribution for an architecture of raw score ``v`` is
:func:`quantile` ``(reference, v)``, the empirical distribution function of the reference
at ``v`` (``searchsorted(reference, v, side="right") / n`` at the reference's values),
interpolated linearly between them and continued by a bounded tanh tail outside them,
so that it is strictly increasing: a one-member ensemble ranks exactly as its member, and
contributions stay in ``(0, 1 + 1/n)`` so no member outweighs its weight. The score is
the weighted sum of the contributions. Nothing depends on the other architectures
scored: one architecture alone gets the number it gets within any set.

A file holds either one member list for every target (``"members"``, *joint*) or one per
target (``"targets": {target: {"members": [...]}}``), so a per-target choice is one file::

    {"format": "autoprox-ensemble/1", "name": "...", "plan": {...},
     "targets": {"c100_kd": {"members": [{"proxy": "block_mean(...)", "classes": 100,
                                          "weight": 1.0, "reference": [...]}]}, ...}}

``plan`` records the statistics (input, batch, seeds) the references were scored with;
scoring with another plan mixes scales, and the commands use the recorded one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from autoprox.core.atomic import atomic_write_json, json_safe, read_json_file
from autoprox.core.errors import InputSpecError, ProxyError
from autoprox.data.cache import StatisticsCache, StatsPlan
from autoprox.networks.statistics import InputSpec
from autoprox.proxies.baselines import BLEND_FEATURES, blend_scores
from autoprox.proxies.proxy import Proxy, resolve_proxy
from autoprox.proxies.proxy_input import check_recorded_split, register_proxy_file_format
from autoprox.proxies.scoring import Outcome, ProgressFn, check_cache_and_plan, check_target, scoring_inputs
from autoprox.spaces.descriptors import DESCRIPTORS, descriptor_columns

#: The format key of an ensemble file.
ENSEMBLE_FORMAT = "autoprox-ensemble/1"
#: The member kinds, by the key that names them.
MEMBER_KINDS = ("proxy", "blend", "descriptor")
#: The key of a joint ensemble's scores (one score per architecture for every target).
JOINT = "*"


# ------------------------------------------------------------------ quantiles

def quantile(reference: Sequence[float], values) -> np.ndarray:
    """Each value's empirical quantile against ``reference`` (interpolated, with tails).

    At a reference value ``r`` it is ``searchsorted(sorted reference, r, side="right") / n``;
    between two distinct reference values it is linear; below the smallest ``r0`` (quantile
    ``c0``) it is ``c0 * (1 + tanh((v - r0) / w))`` and above the largest ``rn`` it is
    ``1 + tanh((v - rn) / w) / n``, ``w`` the reference's range (1 when it has one value).
    Strictly increasing, so it keeps the order of any values; NaN stays NaN.
    """
    ref = np.sort(np.asarray(reference, dtype=np.float64))
    if ref.size == 0 or not np.all(np.isfinite(ref)):
        raise ProxyError("an ensemble member's reference must be a non-empty list of finite numbers")
    v = np.asarray(values, dtype=np.float64)
    points = np.unique(ref)
    levels = np.searchsorted(ref, points, side="right") / ref.size
    width = float(points[-1] - points[0]) or 1.0
    inside = np.interp(v, points, levels)
    with np.errstate(invalid="ignore", over="ignore"):
        below = levels[0] * (1.0 + np.tanh((v - points[0]) / width))
        above = 1.0 + np.tanh((v - points[-1]) / width) / ref.size
    out = np.where(v < points[0], below, np.where(v > points[-1], above, inside))
    return np.where(np.isnan(v), np.nan, out)


# ------------------------------------------------------------------ members

@dataclass(frozen=True)
class Member:
    """One member: its kind (a key of :data:`MEMBER_KINDS`) and what it holds, its weight and
    its sorted reference scores. ``classes``: the statistics' class count (``proxy`` members)."""

    kind: str
    value: object
    weight: float
    reference: tuple[float, ...]
    classes: int = 100

    @property
    def label(self) -> str:
        """A short name for tables: the proxy text, ``blend`` or the descriptor."""
        return {"proxy": str(self.value), "blend": "blend", "descriptor": str(self.value)}[self.kind]

    def to_json(self) -> dict:
        data = {self.kind: self.value, "weight": self.weight}
        if self.kind == "proxy":
            data["classes"] = self.classes
        return data | {"reference": list(self.reference)}


def member(kind: str, value, raw_reference: Sequence[float], weight: float = 1.0, classes: int = 100) -> Member:
    """A member whose reference is ``raw_reference`` (its raw scores on the architectures it is
    fitted on; sorted here)."""
    ref = np.sort(np.asarray(raw_reference, dtype=np.float64))
    return _checked(Member(kind, value, float(weight), tuple(float(r) for r in ref), int(classes)), "member")


def _checked(item: Member, where: str) -> Member:
    if item.kind not in MEMBER_KINDS:
        raise ProxyError(f"{where}: unknown member kind {item.kind!r}; known: {', '.join(MEMBER_KINDS)}")
    if isinstance(item.weight, bool) or not math.isfinite(item.weight) or item.weight < 0:
        raise ProxyError(f"{where}.weight: must be a finite number >= 0, got {item.weight!r}")
    if not item.reference or not all(math.isfinite(r) for r in item.reference):
        raise ProxyError(f"{where}.reference: must be a non-empty list of finite numbers")
    if list(item.reference) != sorted(item.reference):
        raise ProxyError(f"{where}.reference: must be sorted")
    if item.kind == "proxy":
        if not isinstance(item.value, str):
            raise ProxyError(f"{where}.proxy: must be a string (a genome or a built-in name)")
        if isinstance(item.classes, bool) or not isinstance(item.classes, int) or item.classes < 1:
            raise ProxyError(f"{where}.classes: must be a positive integer, got {item.classes!r}")
    elif item.kind == "descriptor" and item.value not in DESCRIPTORS:
        raise ProxyError(f"{where}.descriptor: unknown descriptor {item.value!r}; known: {', '.join(DESCRIPTORS)}")
    elif item.kind == "blend":
        choice = item.value
        ok = isinstance(choice, dict) and all(isinstance(choice.get(k), list) for k in ("features", "center",
                                                                                          "scale", "coef"))
        if not ok or len({len(choice[k]) for k in ("features", "center", "scale", "coef")}) != 1:
            raise ProxyError(f"{where}.blend: must be a fitted blend (features, center, scale, coef of one length)")
        unknown = [f for f in choice["features"] if f.removeprefix("log_") not in DESCRIPTORS]
        if unknown:
            raise ProxyError(f"{where}.blend: unknown feature {unknown[0]!r}; known: {', '.join(BLEND_FEATURES)}")
    return item


def _member_from_json(data, where: str) -> Member:
    if not isinstance(data, dict):
        raise ProxyError(f"{where}: must be an object")
    kinds = [k for k in MEMBER_KINDS if k in data]
    if len(kinds) != 1:
        raise ProxyError(f"{where}: must have exactly one of {', '.join(MEMBER_KINDS)}")
    reference = data.get("reference")
    if not isinstance(reference, list) or not all(isinstance(r, (int, float)) and not isinstance(r, bool)
                                                  for r in reference):
        raise ProxyError(f"{where}.reference: must be a list of numbers")
    weight = data.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise ProxyError(f"{where}.weight: must be a number, got {weight!r}")
    item = Member(kinds[0], data[kinds[0]], float(weight), tuple(float(r) for r in reference),
                  data.get("classes", 100))
    item = _checked(item, where)
    if item.kind == "proxy":
        try:
            resolved = resolve_proxy(item.value)
        except ProxyError as exc:
            raise ProxyError(f"{where}.proxy: {exc}") from None
        if not isinstance(resolved, Proxy) or resolved.provenance.get("file"):
            raise ProxyError(f"{where}.proxy: must be a genome string or a built-in name, not a file")
    return item


# ------------------------------------------------------------------ the ensemble

@dataclass(frozen=True)
class EnsembleProxy:
    """A weighted quantile sum of members, joint or per target (see the module docstring).

    ``members`` maps :data:`JOINT` (one list for every target) or each target to its
    members. ``plan`` is the statistics the references were scored with (``{"input":
    InputSpec.to_json(), "seeds": [...]}``; class counts are the members' own), or None.
    """

    name: str
    members: Mapping[str, tuple[Member, ...]]
    plan: Mapping | None = None
    provenance: Mapping = field(default_factory=dict)
    note: str = ""
    genome = None
    zoo = None
    kind = "ensemble"
    set_level = False

    @property
    def joint(self) -> bool:
        """Whether one member list serves every target."""
        return JOINT in self.members

    @property
    def targets(self) -> tuple[str, ...]:
        """The targets of a per-target ensemble (empty for a joint one)."""
        return () if self.joint else tuple(self.members)

    @property
    def source(self) -> str:
        return str(self.provenance.get("file") or "ensemble")

    @property
    def needs_statistics(self) -> bool:
        return any(m.kind == "proxy" and _member_proxy(m.value).needs_statistics
                   for ms in self.members.values() for m in ms)

    def members_for(self, target: str | None) -> tuple[Member, ...]:
        """The members that score ``target`` (None: the joint list); ProxyError when there are none."""
        if self.joint:
            return self.members[JOINT]
        check_target(self, target)
        return self.members[target]

    def for_target(self, target: str) -> "EnsembleProxy":
        """The members that score ``target``, as a joint ensemble (scoring every target alike);
        a joint ensemble is returned as it is."""
        if self.joint:
            return self
        provenance = {**{k: v for k, v in self.provenance.items() if k != "file"}, "target": target}
        return EnsembleProxy(f"{self.name}[{target}]", {JOINT: self.members_for(target)}, self.plan, provenance,
                             self.note)

    def recorded_plan(self, target_classes: Mapping[str, int]) -> StatsPlan | None:
        """The recorded statistics (input, seeds) for ``target_classes`` (None when none is recorded)."""
        if self.plan is None:
            return None
        return StatsPlan(InputSpec(**self.plan["input"]), tuple(self.plan["seeds"]), dict(target_classes))

    def scoring_plan(self, plan: StatsPlan) -> StatsPlan:
        """The statistics it is scored with where a command has ``plan``: the recorded ones (its references were
        scored with them) at ``plan``'s class counts, or ``plan`` when none is recorded."""
        return self.recorded_plan(plan.target_classes) or plan

    def target_scores(self, archs: Sequence, cache: StatisticsCache, plan: StatsPlan, targets: Sequence[str],
                      workers: int = 1, progress: ProgressFn | None = None,
                      teacher=None) -> dict[str, np.ndarray]:
        """Scores of ``archs`` per target: each member scored once (``proxy`` members by
        :meth:`Proxy.score` with ``plan``'s input and seeds at the member's class count),
        its quantile against its reference, weighted and summed. Raises InvalidProxy as
        :meth:`Proxy.score` does, and ConfigError (one line) when ``cache`` or ``plan`` is missing."""
        members = {target: self.members_for(target) for target in targets}
        raw = RawMemberScores(archs, cache, plan, workers, progress, teacher)
        return {target: _weighted_sum(members[target], raw, len(archs)) for target in targets}

    def scores(self, archs: Sequence, cache: StatisticsCache, plan: StatsPlan, target: str | None = None,
               workers: int = 1, progress: ProgressFn | None = None, teacher=None) -> np.ndarray:
        """One score per architecture: the joint members', or ``target``'s; ConfigError as
        :meth:`target_scores`."""
        members = self.members_for(target)
        return _weighted_sum(members, RawMemberScores(archs, cache, plan, workers, progress, teacher), len(archs))

    def candidate_scores(self, archs: Sequence, spec: InputSpec, seeds: Sequence[int], cache: StatisticsCache,
                         target: str | None = None, *, workers: int = 1, keep_statistics: bool = True,
                         head_classes: int = 100, teacher=None) -> list[Outcome]:
        """(score, seconds, error) of each architecture of ``archs`` for ``target`` (None: the joint
        members), failures kept and never stopping the others: the ViT search's form. Each
        ``proxy`` member's raw values come from :meth:`Proxy.raw_values` per seed (its own class
        count; statistics kept in the cache only with ``keep_statistics``), averaged over seeds."""
        members = [m for m in self.members_for(target) if m.weight > 0]
        size = len(archs)
        seconds, errors = np.zeros(size), [""] * size
        total = np.zeros(size)
        columns = None
        for item in members:
            if item.kind == "proxy":
                runs = [_member_proxy(item.value).raw_values(archs, spec, seed, item.classes, cache, workers=workers,
                                                             keep_statistics=keep_statistics,
                                                             head_classes=head_classes, teacher=teacher)
                        for seed in seeds]
                raw = np.full(size, np.nan)
                for index in range(size):
                    results = [run[index] for run in runs]
                    seconds[index] += sum(r.seconds for r in results if r.seconds == r.seconds)
                    failed = [r.error for r in results if not r.ok]
                    if failed and not errors[index]:
                        errors[index] = f"{item.label[:60]}: {failed[0]}"[:300]
                    elif not failed:
                        raw[index] = float(np.mean([r.raw for r in results]))
            else:
                columns = columns if columns is not None else descriptor_columns(archs)
                raw = (np.asarray(columns[item.value], dtype=np.float64) if item.kind == "descriptor"
                       else blend_scores(item.value, columns))
            total = total + item.weight * quantile(item.reference, raw)
        return [(None, float(seconds[i]), errors[i]) if errors[i] else (float(total[i]), float(seconds[i]), "")
                for i in range(size)]

    def score_architectures(self, archs, workers: int = 1, cache_dir: str | None = None, progress: bool = False,
                            *, cache: StatisticsCache | None = None, plan: StatsPlan | None = None,
                            target: str | None = None) -> np.ndarray:
        """Scores of architectures as ``autoprox score --proxy ENSEMBLE.json`` computes them: :meth:`scores` with
        :meth:`scoring_plan` (the recorded statistics), the arguments and their defaults as
        :meth:`Proxy.score_architectures <autoprox.proxies.proxy.Proxy.score_architectures>` takes them.

        ``target``: the target whose members score (a per-target ensemble needs one: ProxyError naming its
        targets, before any work); a joint ensemble scores every target alike. Returns one score per
        architecture, in the order given.
        """
        from autoprox.core.progress import Progress

        parsed, cache, plan = scoring_inputs(archs, workers, cache_dir, cache, plan)
        return self.scores(parsed, cache, self.scoring_plan(plan), target, workers=workers,
                           progress=Progress("statistics") if progress else None)

    def to_json(self) -> dict:
        data = {"format": ENSEMBLE_FORMAT, "name": self.name}
        if self.plan is not None:
            data["plan"] = dict(self.plan)
        if self.joint:
            data["members"] = [m.to_json() for m in self.members[JOINT]]
        else:
            data["targets"] = {t: {"members": [m.to_json() for m in ms]} for t, ms in self.members.items()}
        provenance = {k: v for k, v in self.provenance.items() if k != "file"}
        if provenance:
            data["provenance"] = provenance
        return json_safe(data)

    def save(self, path: str | Path) -> Path:
        """Write the ensemble file atomically; returns its path."""
        path = Path(path)
        atomic_write_json(path, self.to_json())
        return path


def _weighted_sum(members: Sequence[Member], raw: "RawMemberScores", size: int) -> np.ndarray:
    total = np.zeros(size)
    for item in members:
        if item.weight > 0:
            total = total + item.weight * quantile(item.reference, raw(item))
    return total


class RawMemberScores:
    """Raw scores of members on one set of architectures, each computed once."""

    def __init__(self, archs: Sequence, cache: StatisticsCache, plan: StatsPlan, workers: int = 1,
                 progress: ProgressFn | None = None, teacher=None):
        check_cache_and_plan(cache, plan)  # what a proxy's score says, before any member is scored
        self.archs, self.cache, self.plan = list(archs), cache, plan
        self.workers, self.progress, self.teacher = workers, progress, teacher
        self._columns: dict | None = None
        self._done: dict = {}

    @property
    def columns(self) -> dict:
        if self._columns is None:
            self._columns = descriptor_columns(self.archs)
        return self._columns

    def __call__(self, item: Member) -> np.ndarray:
        if item.kind == "descriptor":
            return np.asarray(self.columns[item.value], dtype=np.float64)
        if item.kind == "blend":
            return blend_scores(item.value, self.columns)
        key = (item.value, item.classes)
        if key not in self._done:
            plan = StatsPlan(self.plan.spec, tuple(self.plan.seeds), {"member": item.classes})
            proxy = _member_proxy(item.value)
            self._done[key] = proxy.score(self.archs, self.cache, plan, workers=self.workers,
                                          progress=self.progress, teacher=self.teacher)[item.classes]
        return self._done[key]


def _member_proxy(text: str) -> Proxy:
    return resolve_proxy(text)


# ------------------------------------------------------------------ reading

def ensemble_from_json(data: Mapping, where: str = "ensemble") -> EnsembleProxy:
    """An :class:`EnsembleProxy` from its JSON form; ProxyError naming ``where`` and the field."""
    if not isinstance(data, Mapping) or data.get("format") != ENSEMBLE_FORMAT:
        raise ProxyError(f"{where}: 'format' must be {ENSEMBLE_FORMAT!r}")
    name = data.get("name", Path(where).stem)
    if not isinstance(name, str) or not name:
        raise ProxyError(f"{where}: 'name' must be a non-empty string")
    plan = data.get("plan")
    if plan is not None:
        if not isinstance(plan, dict) or not isinstance(plan.get("input"), dict) \
                or not isinstance(plan.get("seeds"), list) or not plan["seeds"]:
            raise ProxyError(f"{where}: 'plan' must hold 'input' (an object) and 'seeds' (a non-empty list)")
        seeds = plan["seeds"]
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds) \
                or len(set(seeds)) != len(seeds):
            raise ProxyError(f"{where}: plan.seeds must be distinct statistics seeds (integers of at least 0), "
                             f"got {seeds!r:.60}")
        try:
            InputSpec(**plan["input"])
        except (TypeError, ValueError, InputSpecError) as exc:
            raise ProxyError(f"{where}: plan.input: {exc}") from None
    if ("members" in data) == ("targets" in data):
        raise ProxyError(f"{where}: must have exactly one of 'members' (joint) and 'targets' (per target)")
    if "members" in data:
        lists = {JOINT: (data["members"], "members")}
    else:
        targets = data["targets"]
        if not isinstance(targets, dict) or not targets:
            raise ProxyError(f"{where}: 'targets' must be a non-empty object of target -> {{members}}")
        lists = {}
        for target, entry in targets.items():
            if not isinstance(entry, dict):
                raise ProxyError(f"{where}: targets.{target} must be an object with 'members'")
            lists[target] = (entry.get("members"), f"targets.{target}.members")
    members = {}
    for key, (items, field_name) in lists.items():
        if not isinstance(items, list) or not items:
            raise ProxyError(f"{where}: '{field_name}' must be a non-empty list")
        members[key] = tuple(_member_from_json(m, f"{where}: {field_name}[{i}]") for i, m in enumerate(items))
        if not any(m.weight > 0 for m in members[key]):
            raise ProxyError(f"{where}: '{field_name}' has no member with a positive weight")
    provenance = dict(data.get("provenance") or {}) if isinstance(data.get("provenance", {}), dict) else {}
    if provenance.get("split") is not None:  # rank reads it as the run's split, as a genome file's
        check_recorded_split(Path(where), provenance["split"])
    return EnsembleProxy(name, members, plan, provenance)


def load_ensemble(path: str | Path) -> EnsembleProxy:
    """Read an ensemble file; ProxyError naming the file and the field when it is not one."""
    path = Path(path)
    data = read_json_file(path, "a JSON ensemble file", ProxyError)
    ensemble = ensemble_from_json(data, str(path))
    return EnsembleProxy(ensemble.name, ensemble.members, ensemble.plan,
                         {**ensemble.provenance, "file": str(path)})


@register_proxy_file_format(ENSEMBLE_FORMAT)
def _read_ensemble_file(path: Path, data: Mapping) -> EnsembleProxy:
    ensemble = ensemble_from_json(data, str(path))
    return EnsembleProxy(ensemble.name, ensemble.members, ensemble.plan,
                         {**ensemble.provenance, "file": str(path)})


__all__ = ["ENSEMBLE_FORMAT", "JOINT", "MEMBER_KINDS", "EnsembleProxy", "Member", "RawMemberScores",
           "ensemble_from_json", "load_ensemble", "member", "quantile"]
