"""The shipped params.yaml is consistent: what the default pipeline (and the paper profile) would run exists,
builds and points at real feature sets and published figures -- so a typo fails here, not an hour into
`dvc repro`."""

from pathlib import Path

import pytest
import yaml

from models import build_model
from punctuation.labels import LABELS
from punctuation.params import experiment_config, load_params
from punctuation.reporting import load_published, published_figures

REPO = Path(__file__).resolve().parents[1]
PARAMS_PATH = REPO / "params.yaml"
RAW = yaml.safe_load(PARAMS_PATH.read_text(encoding="utf-8"))
PROFILES = sorted(RAW["profiles"])


def test_every_profile_defines_the_same_experiments():
    names = {profile: set(RAW["profiles"][profile]["experiments"]) for profile in PROFILES}
    first = names[PROFILES[0]]
    for profile, defined in names.items():
        assert defined == first, f"profile {profile!r} differs: {sorted(defined ^ first)}"


@pytest.mark.parametrize("profile", PROFILES)
def test_the_experiment_list_and_variants_name_defined_things(profile):
    params = load_params(PARAMS_PATH, profile=profile)
    defined = set(params["active"]["experiments"])
    assert set(params["experiments"]) <= defined
    feature_sets = set(params["embed"]["feature_sets"])
    for name, variant in (params.get("variants") or {}).items():
        assert variant["experiment"] in defined, name
        assert variant["features"] in feature_sets, name
        # The variant's word-only baseline is the experiment itself, which the pipeline must train.
        assert variant["experiment"] in params["experiments"], name


@pytest.mark.parametrize("profile", PROFILES)
def test_published_references_resolve(profile):
    published = load_published()
    params = load_params(PARAMS_PATH, profile=profile)
    references = [experiment.get("published") for experiment in params["active"]["experiments"].values()]
    references += [variant.get("published") for variant in (params.get("variants") or {}).values()]
    for reference in filter(None, references):
        figures = published_figures(reference, published)
        assert 0 < figures["ref"]["f1"] < 100


@pytest.mark.parametrize("name", sorted(RAW["profiles"]["small"]["experiments"]))
def test_every_small_experiment_builds_its_model(name):
    params = load_params(PARAMS_PATH, profile="small")
    model_config, train_config = experiment_config(params, name)
    model = build_model(model_config, num_labels=len(LABELS), vector_dim=50, vocab_size=100)
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) > 0
    assert train_config["batch_size"] > 0 and train_config["lr"] > 0
