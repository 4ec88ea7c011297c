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


#: what a run of ``variants`` consists of (an experiment trained from scratch on another feature set)
VARIANT_KEYS = ("experiment", "features", "published", "train")
#: what a run of ``tunings`` consists of (a trained experiment's model tuned on another feature set)
TUNING_KEYS = ("from", "features", "published", "model", "train")


def _run_entry(params: dict[str, Any], section: str, run: str, keys: tuple[str, ...]) -> dict[str, Any]:
    runs = _mapping(params.get(section), section)
    if run not in runs:
        raise ParamsError(f"params: {section}.{run} is not defined (defined: {sorted(runs)})")
    where = f"{section}.{run}"
    entry = _mapping(runs[run], where)
    unknown = sorted(set(entry) - set(keys))
    if unknown:
        raise ParamsError(f"{where}: unknown {', '.join(unknown)} (a run has {', '.join(keys)})")
    return entry


def variant_config(params: dict[str, Any], run: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The ``(experiment, model, train)`` of run ``run`` of ``variants`` in the active profile: the experiment
    trained from scratch on another feature set.

    ``train`` is the experiment's training settings with the run's own ``train`` merged over them (a key the
    experiment lacks is an error).
    """
    entry = _run_entry(params, "variants", run, VARIANT_KEYS)
    experiment = require(entry, "experiment", f"variants.{run}")
    model, train = experiment_config(params, experiment)
    return experiment, model, merged(train, entry.get("train"), f"variants.{run}.train", "train")


def tuning_config(params: dict[str, Any], run: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The ``(experiment, model, train)`` of run ``run`` of ``tunings`` in the active profile: the trained model
    of experiment ``from`` (``artifacts/<from>/model``, made by stage ``train@<from>``) tuned on another feature
    set, its new input columns starting at zero (:mod:`training.warm_start`).

    ``from`` must be one of ``experiments`` (the experiments the pipeline trains); ``train`` is that
    experiment's settings with the run's own ``train`` merged over them, ``model`` its model settings with the
    run's own ``model`` over them (only what changes how it trains, such as frozen layers: the warm start
    refuses any other difference).
    """
    where = f"tunings.{run}"
    entry = _run_entry(params, "tunings", run, TUNING_KEYS)
    experiment = require(entry, "from", where)
    trained = params.get("experiments") or []
    if experiment not in trained:
        raise ParamsError(f"{where}.from: {experiment!r} is not one of the experiments the pipeline trains "
                          f"({', '.join(trained)}); a tuning starts from a trained model")
    model, train = experiment_config(params, experiment)
    # a model override may only change how the model trains (frozen layers): the warm start checks it
    model = merged(model, entry.get("model"), f"{where}.model", f"experiment_defs.{experiment}.model")
    return experiment, model, merged(train, entry.get("train"), f"{where}.train", "train")


def runs_on_feature_sets(params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every run of ``variants`` and ``tunings`` by name: ``{"experiment", "features", "published"?, "tuned"}``
    (a tuning's experiment is its ``from``) -- what reports and the feature-set stages list."""
    runs = {}
    for run, entry in (params.get("variants") or {}).items():
        runs[run] = {**{k: v for k, v in (entry or {}).items() if k != "train"}, "tuned": False}
    for run, entry in (params.get("tunings") or {}).items():
        entry = entry or {}
        if run in runs:
            raise ParamsError(f"params: {run!r} is both a variant and a tuning; give them different names")
        runs[run] = {"experiment": entry.get("from"), "features": entry.get("features"), "tuned": True,
                     **({"published": entry["published"]} if "published" in entry else {})}
    return runs


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
