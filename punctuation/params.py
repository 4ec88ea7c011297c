"""Reading ``params.yaml``: the pipeline's single source of configuration.

``params.yaml`` defines everything once: sections shared by every profile (``data``, ``embed``, ``evaluate``,
...), the shared training settings ``train``, and each experiment under ``experiment_defs`` (its
``published`` row, ``model`` and own ``train`` settings, as published). A profile under ``profiles`` holds
overrides only, merged key by key: its ``data`` over ``data``, its ``train`` over ``train`` and its
``experiments.NAME`` over ``experiment_defs.NAME``. The top-level ``profile`` key picks the active one.
Overriding a key that the definitions lack is an error, so a typo cannot pass as a setting.

An experiment's training settings, later ones winning: the shared ``train``, the definition's own ``train``,
the profile's ``train``, the profile's ``train`` for that experiment -- the profile's layer wins over the
definitions', and within a layer the experiment's own settings win over the shared ones.

Stage wrappers call :func:`load_params` and pass plain values on to the library functions, which take no
hidden defaults.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

DEFAULT_PARAMS_PATH = Path("params.yaml")
#: what a profile may override, and what an experiment consists of
PROFILE_SECTIONS = ("data", "train", "experiments")
EXPERIMENT_KEYS = ("published", "model", "train")


class ParamsError(ValueError):
    """A missing or malformed entry in the params file."""


def load_params(path: str | Path = DEFAULT_PARAMS_PATH, profile: str | None = None) -> dict[str, Any]:
    """Load the params file and resolve the active profile.

    ``profile`` overrides the file's own ``profile`` key. Every profile is checked against the definitions,
    the active one is merged in: ``data`` and ``train`` become the profile's, and an extra key ``active``
    holds the resolved profile -- ``data``, ``train`` and ``experiments`` (name -> ``published`` if any,
    ``model``, and the complete ``train`` settings of that experiment).
    """
    path = Path(path)
    try:
        params = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise ParamsError(f"{path}: params file not found") from error
    except yaml.YAMLError as error:
        raise ParamsError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(params, dict):
        raise ParamsError(f"{path}: expected a mapping at the top level")
    name = profile or params.get("profile")
    profiles = params.get("profiles") or {}
    if name not in profiles:
        raise ParamsError(f"{path}: profile {name!r} is not one of {sorted(profiles)}")
    try:
        resolved = {other: _resolve_profile(params, other) for other in profiles}
    except ParamsError as error:
        raise ParamsError(f"{path}: {error}") from None
    active = resolved[name]
    for section in ("data", "train"):
        if section in params:
            params[section] = active[section]
    params["profile"] = name
    params["active"] = active
    return params


def require(section: dict[str, Any], key: str, where: str) -> Any:
    """Return ``section[key]``, or raise a :class:`ParamsError` naming the missing ``where.key``."""
    if key not in section:
        raise ParamsError(f"params: missing '{where}.{key}'")
    return section[key]


def experiment_config(params: dict[str, Any], name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``(model, train)`` settings of experiment ``name`` in the active profile (copies, free to change)."""
    experiments = params["active"]["experiments"]
    if name not in experiments:
        raise ParamsError(f"params: experiment {name!r} is not defined in experiment_defs "
                          f"(defined: {sorted(experiments)})")
    experiment = experiments[name]
    return copy.deepcopy(experiment["model"]), copy.deepcopy(experiment["train"])


#: what a run of ``variants`` consists of
VARIANT_KEYS = ("experiment", "features", "published", "start_from", "train")
#: ``start_from`` values: the model directory (a key of ``punctuate``) a run starts from. The train_variant stage
#: depends on ``punctuate.text_model``, so that is the one a run may start from.
START_FROM = ("text_model",)


def variant_config(params: dict[str, Any], run: str) -> tuple[str, dict[str, Any], dict[str, Any], str | None]:
    """The ``(experiment, model, train, init_from)`` of run ``run`` of ``variants`` in the active profile.

    ``train`` is the experiment's training settings with the run's own ``train`` merged over them (a key the
    experiment lacks is an error); ``init_from`` is the model directory the run starts from
    (``start_from: text_model``: ``punctuate.text_model``), or None for a run from scratch.
    """
    variants = _mapping(params.get("variants"), "variants")
    if run not in variants:
        raise ParamsError(f"params: variants.{run} is not defined (defined: {sorted(variants)})")
    where = f"variants.{run}"
    entry = _mapping(variants[run], where)
    unknown = sorted(set(entry) - set(VARIANT_KEYS))
    if unknown:
        raise ParamsError(f"{where}: unknown {', '.join(unknown)} (a run has {', '.join(VARIANT_KEYS)})")
    experiment = require(entry, "experiment", where)
    model, train = experiment_config(params, experiment)
    train = merged(train, entry.get("train"), f"{where}.train", "train")
    start = entry.get("start_from")
    if start is None:
        return experiment, model, train, None
    if start not in START_FROM:
        raise ParamsError(f"{where}.start_from: {start!r} is not one of {', '.join(START_FROM)}")
    return experiment, model, train, require(_mapping(params.get("punctuate"), "punctuate"), start, "punctuate")


def _resolve_profile(params: dict[str, Any], name: str) -> dict[str, Any]:
    """Profile ``name`` merged over the definitions: ``{"data", "train", "experiments"}``."""
    where = f"profiles.{name}"
    overrides = _mapping(params["profiles"][name], where)
    unknown = sorted(set(overrides) - set(PROFILE_SECTIONS))
    if unknown:
        raise ParamsError(f"{where}: {', '.join(unknown)} cannot be overridden by a profile "
                          f"(a profile has {', '.join(PROFILE_SECTIONS)})")
    shared_train = _mapping(params.get("train"), "train")
    profile_train = overrides.get("train")
    definitions = _mapping(params.get("experiment_defs"), "experiment_defs")
    experiment_overrides = _mapping(overrides.get("experiments"), f"{where}.experiments")
    for experiment in experiment_overrides:
        if experiment not in definitions:
            raise ParamsError(f"{where}.experiments.{experiment}: no such experiment in experiment_defs "
                              f"(defined: {sorted(definitions)})")
    experiments = {}
    for experiment, definition in definitions.items():
        at, override_at = f"experiment_defs.{experiment}", f"{where}.experiments.{experiment}"
        definition = _mapping(definition, at)
        override = _mapping(experiment_overrides.get(experiment), override_at)
        for entry, entry_at in ((definition, at), (override, override_at)):
            unknown = sorted(set(entry) - set(EXPERIMENT_KEYS))
            if unknown:
                raise ParamsError(f"{entry_at}: unknown {', '.join(unknown)} "
                                  f"(an experiment has {', '.join(EXPERIMENT_KEYS)})")
        if "model" not in definition:
            raise ParamsError(f"{at}: missing 'model'")
        if "published" in override and "published" not in definition:
            raise ParamsError(f"{override_at}.published: not in {at} (give the definition one)")
        train = merged(shared_train, definition.get("train"), f"{at}.train", "train")
        train = merged(train, profile_train, f"{where}.train", "train")
        resolved = {}
        if "published" in definition:
            resolved["published"] = override.get("published", definition["published"])
        resolved["model"] = merged(_mapping(definition["model"], f"{at}.model"), override.get("model"),
                                   f"{override_at}.model", f"{at}.model")
        resolved["train"] = merged(train, override.get("train"), f"{override_at}.train", "train")
        experiments[experiment] = resolved
    return {"data": merged(_mapping(params.get("data"), "data"), overrides.get("data"), f"{where}.data", "data"),
            "train": merged(shared_train, profile_train, f"{where}.train", "train"),
            "experiments": experiments}


def merged(base: dict[str, Any], override: Any, where: str, defined_at: str) -> dict[str, Any]:
    """``override`` merged key by key over ``base`` (a new mapping; neither argument changes).

    Nested mappings merge the same way; any other value replaces the base's. A key ``base`` lacks is a
    :class:`ParamsError` naming its place ``where`` and the section ``defined_at`` that should define it.
    ``None`` (an empty YAML entry) overrides nothing.
    """
    result = copy.deepcopy(base)
    for key, value in _mapping(override, where).items():
        if key not in base:
            raise ParamsError(f"{where}.{key}: not a key of {defined_at} (which has: {', '.join(map(str, base))})")
        if isinstance(base[key], dict):
            result[key] = merged(base[key], value, f"{where}.{key}", f"{defined_at}.{key}")
        else:
            result[key] = copy.deepcopy(value)
    return result


def _mapping(value: Any, where: str) -> dict[str, Any]:
    """``value`` as a mapping (``None`` is an empty one); anything else is a :class:`ParamsError`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParamsError(f"{where}: expected a mapping, got {value!r}")
    return value
