"""The shipped params.yaml is consistent: what the default pipeline (and the paper profile) would run exists,
builds and points at real feature sets and published figures -- so a typo fails here, not an hour into
`dvc repro`. And experiments.params resolves profiles as overrides of the definitions, refusing an override
of something not defined."""

import json
import re
from pathlib import Path

import pytest
import yaml

from corpus.labels import LABELS
from experiments.params import ParamsError, experiment_config, load_params
from models import build_model
from reporting.results import load_published, published_figures

REPO = Path(__file__).resolve().parents[1]
PARAMS_PATH = REPO / "params.yaml"
RAW = yaml.safe_load(PARAMS_PATH.read_text(encoding="utf-8"))
PROFILES = sorted(RAW["profiles"])
#: What each profile resolved to before profiles became overrides of one set of definitions (params.yaml and
#: experiments/params.py of the commit before): data, and per experiment published/model/complete train.
#: A deliberate change of a setting updates this file too.
SNAPSHOT = json.loads((REPO / "tests" / "data" / "params_resolution.json").read_text(encoding="utf-8"))


def test_every_profile_names_what_dvc_tracks():
    """dvc.yaml tracks profiles.<profile>.data, .train and .experiments.<name>: DVC refuses a missing key."""
    for profile in PROFILES:
        overrides = RAW["profiles"][profile]
        assert {"data", "train", "experiments"} <= set(overrides), profile
        assert set(overrides["experiments"]) == set(RAW["experiment_defs"]), profile


@pytest.mark.parametrize("profile", PROFILES)
def test_each_profile_resolves_as_before(profile):
    expected = SNAPSHOT[profile]
    params = load_params(PARAMS_PATH, profile=profile)
    assert params["data"] == expected["data"] and params["active"]["data"] == expected["data"]
    assert list(params["active"]["experiments"]) == list(expected["experiments"])
    for name, settings in expected["experiments"].items():
        model, train = experiment_config(params, name)
        assert (model, train) == (settings["model"], settings["train"]), name
        assert (list(model), list(train)) == (list(settings["model"]), list(settings["train"])), name  # key order
        experiment = params["active"]["experiments"][name]
        assert ("published" in experiment) == ("published" in settings), name
        assert experiment.get("published") == settings.get("published"), name
    assert params["active"]["train"]["threads"] == expected["experiments"]["lstm"]["train"]["threads"]


@pytest.mark.parametrize("profile", PROFILES)
def test_the_experiment_list_and_variants_name_defined_things(profile):
    params = load_params(PARAMS_PATH, profile=profile)
    defined = set(params["active"]["experiments"])
    assert set(params["experiments"]) <= defined
    feature_sets = set(params["embed"]["feature_sets"])
    for name, variant in (params.get("variants") or {}).items():
        assert variant["experiment"] in defined, name
        assert variant["features"] in feature_sets, name
    for name, tuning in (params.get("tunings") or {}).items():
        assert tuning["from"] in params["experiments"], name  # a tuning starts from a model the pipeline trains
        assert tuning["features"] in feature_sets, name
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


@pytest.mark.parametrize("name", sorted(RAW["experiment_defs"]))
def test_every_small_experiment_builds_its_model(name):
    params = load_params(PARAMS_PATH, profile="small")
    model_config, train_config = experiment_config(params, name)
    model = build_model(model_config, num_labels=len(LABELS), vector_dim=50, vocab_size=100)
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) > 0
    assert train_config["batch_size"] > 0 and train_config["lr"] > 0


def changed(tmp_path, change) -> Path:
    """A copy of the shipped params file with ``change(raw)`` applied (as `dvc exp run -S` would)."""
    raw = yaml.safe_load(PARAMS_PATH.read_text(encoding="utf-8"))
    change(raw)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def test_a_profile_setting_wins_over_the_definitions_unless_the_profile_sets_the_experiment(tmp_path):
    def change(raw):
        raw["profiles"]["small"]["train"].update(epochs=5, batch_size=64)  # -S profiles.small.train.epochs=5 ...
        raw["experiment_defs"]["drnn_lwma"]["model"]["layers"] = 3   # the paper's grid: small sets its own layers
        raw["experiment_defs"]["wrn"]["model"]["widen"] = 4

    params = load_params(changed(tmp_path, change), profile="small")
    ff2 = experiment_config(params, "ff2")[1]
    assert ff2["epochs"] == 5 and ff2["batch_size"] == 8  # FF2's definition says 3 epochs; small's entry, batch 8
    drnn_model, drnn = experiment_config(params, "drnn_lwma")
    assert drnn["epochs"] == 5 and drnn["batch_size"] == 128 and drnn_model["layers"] == 2
    wrn_model, wrn = experiment_config(params, "wrn")
    assert wrn["batch_size"] == 64 and wrn_model["widen"] == 4 and wrn_model["channels"] == 32
    paper_model, paper = experiment_config(load_params(changed(tmp_path, change), profile="paper"), "drnn_lwma")
    assert paper_model["layers"] == 3 and paper["epochs"] == 20 and paper["batch_size"] == 128


def test_resolved_settings_are_copies():
    params = load_params(PARAMS_PATH, profile="small")
    model, train = experiment_config(params, "ffa")
    model["second_dim"], train["lr"] = 1, 1.0
    for name in ("ffa", "ff2", "ff2_no_rdrop"):  # small's FF2 entries share their settings through YAML anchors
        again_model, again_train = experiment_config(params, name)
        assert again_model["second_dim"] == 128 and again_train["lr"] == 0.00005, name


@pytest.mark.parametrize("change, message", [
    (lambda raw: raw["profiles"]["small"]["experiments"].update(transfomer={"model": {"d_model": 64}}),
     "profiles.small.experiments.transfomer: no such experiment in experiment_defs"),
    (lambda raw: raw["profiles"]["small"]["experiments"]["transformer"]["model"].update(d_modle=64),
     "profiles.small.experiments.transformer.model.d_modle: not a key of experiment_defs.transformer.model"),
    (lambda raw: raw["profiles"]["paper"]["experiments"]["blstm"].update(train={"learning_rate": 0.1}),
     "profiles.paper.experiments.blstm.train.learning_rate: not a key of train"),
    (lambda raw: raw["profiles"]["small"]["train"].update(epoch=3),
     "profiles.small.train.epoch: not a key of train"),
    (lambda raw: raw["profiles"]["paper"]["data"].update(eval_splits={"tst": "x"}),
     "profiles.paper.data.eval_splits.tst: not a key of data.eval_splits"),
    (lambda raw: raw["profiles"]["small"].update(evaluate={"window": 50}),
     "profiles.small: evaluate cannot be overridden by a profile"),
    (lambda raw: raw["profiles"]["small"]["experiments"]["wrn"].update(published="yi_tao_2019/word"),
     "profiles.small.experiments.wrn.published: not in experiment_defs.wrn"),
    (lambda raw: raw["profiles"]["small"]["experiments"]["wrn"].update(modle={}),
     r"profiles.small.experiments.wrn: unknown modle \(an experiment has published, model, train\)"),
    (lambda raw: raw["experiment_defs"]["lstm"]["train"].update(lr_peak=0.1),
     "experiment_defs.lstm.train.lr_peak: not a key of train"),
    (lambda raw: raw["experiment_defs"]["lstm"].pop("model"), "experiment_defs.lstm: missing 'model'"),
    (lambda raw: raw["profiles"]["small"]["experiments"].update(conv=[1]),
     r"profiles.small.experiments.conv: expected a mapping, got \[1\]"),
])
def test_an_override_of_something_undefined_is_refused_with_its_place(tmp_path, change, message):
    path = changed(tmp_path, change)
    for profile in PROFILES:  # every profile is checked, the active one or not
        with pytest.raises(ParamsError, match=f"^{re.escape(str(path))}: {message}"):
            load_params(path, profile=profile)


def test_an_unknown_profile_or_experiment_is_refused():
    with pytest.raises(ParamsError, match="profile 'tiny' is not one of"):
        load_params(PARAMS_PATH, profile="tiny")
    with pytest.raises(ParamsError, match="experiment 'gpt' is not defined in experiment_defs"):
        experiment_config(load_params(PARAMS_PATH), "gpt")
