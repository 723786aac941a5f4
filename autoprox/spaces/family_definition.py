"""The definition file of a declarative ViT family: its fields, their validation and defaults.

:func:`normalise_definition` turns a definition (the parsed JSON or TOML file, see
``docs/spaces.md``) into the canonical form :class:`autoprox.spaces.family.FamilySpace`
is built from, every default filled in. Each problem is a
:class:`~autoprox.spaces.base.SpaceDefinitionError` naming the file and the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from autoprox.spaces.base import (
    SpaceDefinitionError,
    is_int,
    is_number,
)
from autoprox.spaces.limits import (
    IMAGE_SIZE,
    normalise_limits,
)

SCOPES = ("network", "stage", "block")
#: The width choice: ``embed_dim`` (``hidden_dim``, ViT-Bench-101's AutoFormer name for it) or PiT's ``base_dim``.
WIDTH_KEYS = ("embed_dim", "hidden_dim", "base_dim")
#: Choice key -> (scopes allowed, default scope).
CHOICE_SCOPES = {
    "embed_dim": (("network", "stage"), "stage"),
    "hidden_dim": (("network", "stage"), "stage"),
    "base_dim": (("network", "stage"), "network"),
    "depth": (("network", "stage"), "stage"),
    "num_heads": (SCOPES, "stage"),
    "mlp_ratio": (SCOPES, "stage"),
}
#: Top-level fields of a definition and their defaults (``None``: required or derived).
FIELDS = {
    "name": None, "description": "", "patch_size": None, "patch_stride": None, "class_token": True,
    "position_embedding": "tokens", "classifier": None, "init": "trunc_normal", "stages": 1,
    "attention_head_dim": None, "relative_position": None, "choices": None, "limits": None,
}

POSITION_EMBEDDINGS = ("tokens", "map", "none")
CLASSIFIERS = ("token", "mean")
INITS = ("trunc_normal", "default")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def field_error(source: str, where: str, problem: str) -> SpaceDefinitionError:
    """The error of one field of the definition read from ``source``."""
    return SpaceDefinitionError(f"{source}: field {where!r}: {problem}")



def normalise_definition(definition: Mapping, source: str) -> dict[str, Any]:
    """The validated definition with every default filled in (JSON-able, canonical)."""
    if not isinstance(definition, Mapping):
        raise SpaceDefinitionError(f"{source}: a space definition is a JSON object (a TOML table), "
                                   f"got {type(definition).__name__}")
    unknown = [k for k in definition if k not in FIELDS]
    if unknown:
        raise field_error(source, unknown[0], f"unknown field; known fields: {', '.join(FIELDS)}")
    out: dict[str, Any] = {}
    name = definition.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise field_error(source, "name", f"a name of letters, digits, '.', '_', '+' or '-' is required, got {name!r}")
    out["name"] = name
    description = definition.get("description", "")
    if not isinstance(description, str):
        raise field_error(source, "description", f"must be a string, got {description!r}")
    out["description"] = description
    out["patch_size"] = _positive_int(definition, "patch_size", None, source)
    out["patch_stride"] = _positive_int(definition, "patch_stride", out["patch_size"], source)
    if out["patch_size"] > IMAGE_SIZE:
        raise field_error(source, "patch_size", f"larger than the {IMAGE_SIZE}x{IMAGE_SIZE} input")
    for key in ("class_token",):
        value = definition.get(key, FIELDS[key])
        if not isinstance(value, bool):
            raise field_error(source, key, f"must be true or false, got {value!r}")
        out[key] = value
    out["position_embedding"] = _one_of(definition, "position_embedding", POSITION_EMBEDDINGS, "tokens", source)
    out["classifier"] = _one_of(definition, "classifier", CLASSIFIERS, "token" if out["class_token"] else "mean",
                                source)
    if out["classifier"] == "token" and not out["class_token"]:
        raise field_error(source, "classifier", "'token' needs a class token (class_token: true); use 'mean'")
    out["init"] = _one_of(definition, "init", INITS, "trunc_normal", source)
    out["stages"] = _positive_int(definition, "stages", 1, source)
    out["attention_head_dim"] = _optional_positive_int(definition, "attention_head_dim", source)
    out["relative_position"] = _optional_positive_int(definition, "relative_position", source)
    if out["relative_position"] and not out["class_token"]:
        raise field_error(source, "relative_position", "AutoFormer's relative position tables need a class token")
    out["choices"] = _normalise_choices(definition.get("choices"), out["stages"], source)
    out["limits"] = normalise_limits(definition.get("limits"), source)
    return out


def _positive_int(definition: Mapping, key: str, default: int | None, source: str) -> int:
    value = definition.get(key, default)
    if value is None:
        raise field_error(source, key, "is required")
    if not is_int(value) or value < 1:
        raise field_error(source, key, f"must be a positive integer, got {value!r}")
    return value


def _optional_positive_int(definition: Mapping, key: str, source: str) -> int | None:
    value = definition.get(key)
    if value is None:
        return None
    if not is_int(value) or value < 1:
        raise field_error(source, key, f"must be a positive integer or null, got {value!r}")
    return value


def _one_of(definition: Mapping, key: str, allowed: Sequence[str], default: str, source: str) -> str:
    value = definition.get(key, default)
    if value not in allowed:
        raise field_error(source, key, f"must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")
    return value


def _normalise_choices(choices: Any, stages: int, source: str) -> dict[str, Any]:
    if not isinstance(choices, Mapping):
        raise field_error(source, "choices", "a mapping of embed_dim (or base_dim), depth, num_heads and mlp_ratio "
                                       f"is required, got {choices!r}")
    unknown = [k for k in choices if k not in CHOICE_SCOPES]
    if unknown:
        raise field_error(source, f"choices.{unknown[0]}", f"unknown choice; known: {', '.join(CHOICE_SCOPES)}")
    widths = [k for k in WIDTH_KEYS if k in choices]
    if len(widths) != 1:
        raise field_error(source, "choices", "give exactly one of embed_dim (the width itself; or hidden_dim) and base_dim "
                                       f"(width = base_dim x heads, as in PiT); got {widths or 'neither'}")
    out = {}
    for key in (widths[0], "depth", "num_heads", "mlp_ratio"):
        if key not in choices:
            raise field_error(source, f"choices.{key}", "is required")
        out[key] = _normalise_choice(key, choices[key], stages, source)
    if widths[0] == "base_dim" and out["num_heads"]["per"] == "block":
        raise field_error(source, "choices.num_heads.per", "with base_dim the width is base_dim x heads, so heads are "
                                                     "chosen per stage or per network, not per block")
    return out


def _normalise_choice(key: str, spec: Any, stages: int, source: str) -> dict[str, Any]:
    where = f"choices.{key}"
    if isinstance(spec, (list, tuple)):
        spec = {"values": list(spec)}
    if not isinstance(spec, Mapping):
        raise field_error(source, where, f"a list of values or {{\"values\": [...], \"per\": ...}}, got {spec!r}")
    unknown = [k for k in spec if k not in ("values", "per", "non_decreasing")]
    if unknown:
        raise field_error(source, f"{where}.{unknown[0]}", "unknown; known: values, per, non_decreasing")
    allowed_scopes, default_scope = CHOICE_SCOPES[key]
    per = spec.get("per", default_scope)
    if per not in allowed_scopes:
        raise field_error(source, f"{where}.per", f"must be one of {', '.join(allowed_scopes)}, got {per!r}")
    non_decreasing = spec.get("non_decreasing", False)
    if not isinstance(non_decreasing, bool):
        raise field_error(source, f"{where}.non_decreasing", f"must be true or false, got {non_decreasing!r}")
    if non_decreasing and per != "stage":
        raise field_error(source, f"{where}.non_decreasing", "applies to a choice made per stage (across stages)")
    values = spec.get("values")
    if not isinstance(values, (list, tuple)) or not values:
        raise field_error(source, f"{where}.values", f"a non-empty list is required, got {values!r}")
    given_per_stage = all(isinstance(v, (list, tuple)) for v in values)
    if given_per_stage:
        if per == "network":
            raise field_error(source, f"{where}.values", "one list per stage needs per: stage or block")
        if len(values) != stages:
            raise field_error(source, f"{where}.values", f"{len(values)} lists given for {stages} stage(s)")
        per_stage = [list(v) for v in values]
    else:
        per_stage = [list(values)] * stages
    for s, stage_values in enumerate(per_stage):
        label = f"{where}.values[{s}]" if given_per_stage else f"{where}.values"
        if not stage_values:
            raise field_error(source, label, "a non-empty list is required")
        for value in stage_values:
            ok = is_number(value) and value > 0 and math.isfinite(value) if key == "mlp_ratio" \
                else is_int(value) and value > 0
            if not ok:
                kind = "positive numbers" if key == "mlp_ratio" else "positive integers"
                raise field_error(source, label, f"must be {kind}, got {value!r}")
        if len(set(stage_values)) != len(stage_values):
            raise field_error(source, label, f"repeats a value: {stage_values}")
    return {"values": [sorted(v) for v in per_stage], "per": per, "non_decreasing": non_decreasing}


__all__ = ["CHOICE_SCOPES", "CLASSIFIERS", "FIELDS", "INITS", "NAME_PATTERN", "POSITION_EMBEDDINGS", "SCOPES",
           "WIDTH_KEYS", "field_error", "normalise_definition"]
