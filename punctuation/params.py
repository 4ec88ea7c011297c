"""Reading ``params.yaml``: the pipeline's single source of configuration.

``params.yaml`` holds settings shared by every profile (``data``, ``embed``, ``evaluate``) and one entry per
profile under ``profiles``; the top-level ``profile`` key picks the active one. Stage wrappers call
:func:`load_params` and pass plain values on to the library functions, which take no hidden defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DEFAULT_PARAMS_PATH = Path("params.yaml")


class ParamsError(ValueError):
    """A missing or malformed entry in the params file."""


def load_params(path: str | Path = DEFAULT_PARAMS_PATH, profile: str | None = None) -> dict[str, Any]:
    """Load the params file and resolve the active profile.

    Returns the file's mapping with one extra key, ``active``: the chosen profile's settings (``data``,
    ``model``, ``train``). ``profile`` overrides the file's own ``profile`` key.
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
    params["profile"] = name
    params["active"] = profiles[name]
    return params


def require(section: dict[str, Any], key: str, where: str) -> Any:
    """Return ``section[key]``, or raise a :class:`ParamsError` naming the missing ``where.key``."""
    if key not in section:
        raise ParamsError(f"params: missing '{where}.{key}'")
    return section[key]


def experiment_config(params: dict[str, Any], name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``(model, train)`` settings of experiment ``name`` in the active profile.

    The experiment's ``train`` entries override the profile's shared ``train`` settings.
    """
    experiments = params["active"].get("experiments") or {}
    if name not in experiments:
        raise ParamsError(f"params: experiment {name!r} is not defined in profile {params['profile']!r} "
                          f"(defined: {sorted(experiments)})")
    experiment = experiments[name]
    model = dict(require(experiment, "model", f"profiles.{params['profile']}.experiments.{name}"))
    train = {**require(params["active"], "train", f"profiles.{params['profile']}"), **(experiment.get("train") or {})}
    return model, train
