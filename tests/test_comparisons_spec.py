"""comparisons.spec: a spec read and checked, DVC's -S overrides applied as DVC applies them, each arm's chain
resolved as the pipeline would train it, and the committed text-model spec's arm A equal to b4842e6's settings."""

from __future__ import annotations

import copy

import pytest
import yaml

from comparisons.spec import (SpecError, apply_overrides, chain_settings, is_test_split, load_spec, mapping_overrides,
                              parse_override, write_arm_params)
from experiments.params import experiment_config, load_params
from tests.helpers import REPO

SMALL = {"a": {"b": 1, "c": {"d": "x", "e": [1, 2]}}, "f": "off", "g": None}


def write_spec(path, **changes):
    spec = {"question": "Is B better?", "params": "params.yaml",
            "arms": {"A": {"what": "a", "overrides": [], "train": [{"experiment": "minilm"}]},
                     "B": {"what": "b", "overrides": [], "train": [{"experiment": "minilm"}]}},
            "seeds": [1, 2], "decide_on": ["dev"],
            "keep_rule": {"min_effect": 0.5, "interval_above_zero": True, "every_seed": True,
                          "max_extra_minutes": None}}
    spec.update(changes)
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


@pytest.mark.parametrize("overrides", [
    ["a.b=2", "a.c.d=y"],
    ["+a.h={p: 1, q: data/features}", "++a.b=3", "~a.c.e"],
    ["a.c={d: z}", "+k.l=[1, 2]", "++g=0.0001"],
])
def test_overrides_change_the_params_as_dvc_exp_run_s_does(tmp_path, overrides):
    from dvc.utils.hydra import apply_overrides as dvc_apply

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in SMALL.items() if k != "f"}), encoding="utf-8")
    dvc_apply(path, overrides)
    ours = apply_overrides({k: v for k, v in SMALL.items() if k != "f"}, [parse_override(o) for o in overrides])
    assert ours == yaml.safe_load(path.read_text(encoding="utf-8"))


def test_dvc_own_writer_loses_the_quotes_params_yaml_needs(tmp_path):
    """Why the tool applies overrides to the loaded params: DVC's writer turns compile: "off" into false."""
    from dvc.utils.hydra import apply_overrides as dvc_apply

    path = tmp_path / "params.yaml"
    path.write_text('a: {b: 1}\nf: "off"\n', encoding="utf-8")
    dvc_apply(path, ["a.b=2"])
    assert yaml.safe_load(path.read_text(encoding="utf-8"))["f"] is False
    assert apply_overrides(yaml.safe_load('a: {b: 1}\nf: "off"\n'), [parse_override("a.b=2")])["f"] == "off"


def test_a_mapping_of_overrides_is_the_strings_nested():
    strings = [parse_override(o) for o in ("a.b=2", "a.c.d=y", "+a.h={p: 1}", "~g")]
    mapping = mapping_overrides({"a": {"b": 2, "c": {"d": "y"}, "+h": {"p": 1}}, "~g": None})
    assert apply_overrides(SMALL, mapping) == apply_overrides(SMALL, strings)
    assert SMALL["a"]["b"] == 1  # the params given are not changed


@pytest.mark.parametrize("override, message", [
    ("a.z=1", "not a key of the params file"), ("+a.b=5", "the key exists"), ("~a.z", "no such key"),
    ("a.c={nope: 1}", "a.c.nope: not a key"), ("a.b.c.d=1", "is not a mapping"),
])
def test_an_override_that_does_not_fit_the_params_is_an_error(override, message):
    with pytest.raises(SpecError, match=message):
        apply_overrides(SMALL, [parse_override(override)])


def test_a_sweep_is_not_one_setting():
    with pytest.raises(SpecError, match="no sweeps"):
        parse_override("a.b=1,2")


def test_a_spec_decides_on_dev_splits_only(tmp_path):
    for split in ("ref", "asr", "earnings22_test"):
        with pytest.raises(SpecError, match="a test split never chooses"):
            load_spec(write_spec(tmp_path / "s.yaml", decide_on=["dev", split]))
    assert is_test_split("ref") and is_test_split("x", {"evaluate": {"test_splits": ["x"]}})
    assert not is_test_split("dev") and not is_test_split("earnings22_dev")


def test_a_spec_states_every_part_of_its_keep_rule(tmp_path):
    with pytest.raises(SpecError, match="state max_extra_minutes"):
        load_spec(write_spec(tmp_path / "s.yaml", keep_rule={"min_effect": 0.5, "interval_above_zero": True,
                                                             "every_seed": True}))
    with pytest.raises(SpecError, match="unknown colour"):
        load_spec(write_spec(tmp_path / "s.yaml", colour="red"))
    with pytest.raises(SpecError, match="exactly A and B"):
        load_spec(write_spec(tmp_path / "s.yaml", arms={"A": {"train": [{"experiment": "x"}]}}))


def test_the_rule_hash_covers_what_decides_not_the_free_text(tmp_path):
    base = load_spec(write_spec(tmp_path / "s.yaml"))
    reworded = load_spec(write_spec(tmp_path / "s.yaml", question="Reworded?", notes="a note"))
    assert reworded.rule_sha256 == base.rule_sha256 and reworded.sha256 != base.sha256
    moved = load_spec(write_spec(tmp_path / "s.yaml", keep_rule={"min_effect": 0.3, "interval_above_zero": True,
                                                                 "every_seed": True, "max_extra_minutes": None}))
    more_seeds = load_spec(write_spec(tmp_path / "s.yaml", seeds=[1, 2, 3]))
    assert len({base.rule_sha256, moved.rule_sha256, more_seeds.rule_sha256}) == 3


def test_a_chain_resolves_as_the_pipeline_trains_it(tmp_path):
    params = {"profile": "p", "experiments": {"x": {"features": "data/fx"}},
              "train": {"seed": 1, "lr": 0.1}, "evaluate": {"window": 30, "stride": 15},
              "experiment_defs": {"x": {"model": {"name": "blstm", "dropout": 0.3}}},
              "profiles": {"p": {"train": {}, "experiments": {"x": {}}}},
              "tunings": {"t": {"from": "x", "features": "word", "model": {"dropout": 0.0}, "train": {"lr": 0.01}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    spec = load_spec(write_spec(tmp_path / "s.yaml", params=str(tmp_path / "params.yaml"), arms={
        "A": {"overrides": ["++profiles.p.experiments.x={train: {lr: 0.5}}"],
              "train": [{"experiment": "x"}, {"tuning": "t", "features": "data/fy"}]},
        "B": {"train": [{"tuning": "t"}]}}))
    resolved = write_arm_params(spec, spec.arms["A"], tmp_path / "A.yaml")
    first, second = chain_settings(resolved, spec.arms["A"])
    assert first["features"] == "data/fx" and first["train"]["lr"] == 0.5 and "seed" not in first["train"]
    assert second["experiment"] == "x" and second["features"] == "data/fy"
    assert second["pipeline_features"] == "data/feature_sets/word" and second["model"]["dropout"] == 0.0
    with pytest.raises(SpecError, match="which no earlier step of the arm trains"):
        chain_settings(write_arm_params(spec, spec.arms["B"], tmp_path / "B.yaml"), spec.arms["B"])


def test_the_text_model_spec_sets_b4842e6_against_todays_text_model(tmp_path):
    """Arm A is b4842e6's chain (its params, copied here as literals); arm B is params.yaml's minilm unchanged."""
    spec = load_spec(REPO / "comparisons" / "specs" / "text_model_chain.yaml")
    assert spec.decide_on == ("dev",) and spec.seeds == (1, 2, 3) and all(effect > 0 for effect in spec.keep.min_effect.values())
    params = load_params(REPO / "params.yaml")
    arm_a = write_arm_params(spec, spec.arms["A"], tmp_path / "A.yaml")
    fine_tuning, tuning = chain_settings(arm_a, spec.arms["A"])
    assert (fine_tuning["name"], fine_tuning["features"], tuning["name"], tuning["features"]) == (
        "minilm", "data/features", "minilm_words", "data/features")
    b4842e6_model = {"name": "encoder_tagger", "pretrained": None, "layers": 4, "freeze_layers": 0,
                     "label_subword": "first", "dropout": 0.1, "max_subwords": 256, "layer_mix": True,
                     "head": "blstm", "head_hidden": 256}
    assert fine_tuning["model"] == b4842e6_model and tuning["model"] == {**b4842e6_model, "freeze_layers": 4}
    b4842e6_train = {"lr": 0.0004, "warmup_steps": 50, "max_steps": 1000, "eval_every_steps": 100,
                     "dev_eval_tokens": 10000, "epochs": 2, "batch_size": 16, "lr_schedule": "linear",
                     "label_smoothing": 0.0, "keep": "best", "threads": 2}
    assert {key: fine_tuning["train"][key] for key in b4842e6_train} == b4842e6_train
    assert {key: tuning["train"][key] for key in ("max_steps", "lr", "lr_schedule", "warmup_steps",
                                                  "eval_every_steps", "keep")} == {
        "max_steps": 400, "lr": 0.003, "lr_schedule": "linear", "warmup_steps": 20, "eval_every_steps": 100,
        "keep": "best"}
    arm_b = write_arm_params(spec, spec.arms["B"], tmp_path / "B.yaml")
    (today,) = chain_settings(arm_b, spec.arms["B"])
    model, train = experiment_config(params, "minilm")
    train.pop("seed")
    assert (today["model"], today["train"]) == (model, train)
    assert today["features"] == params["experiments"]["minilm"]["features"]
    assert yaml.safe_load((tmp_path / "B.yaml").read_text()) == copy.deepcopy(
        yaml.safe_load((REPO / "params.yaml").read_text()))


def test_a_decision_split_may_name_its_file_and_its_talks(tmp_path):
    from pathlib import Path

    spec = load_spec(write_spec(tmp_path / "s.yaml", decide_on=["dev", "e22_dev"], splits={
        "e22_dev": {"file": "data/e22/dev.tsv", "talks": "data/e22/dev_talks.tsv"}}))
    assert spec.split_files == {"dev": Path("data/prepared/dev.tsv"), "e22_dev": Path("data/e22/dev.tsv")}
    assert spec.talks == {"e22_dev": "data/e22/dev_talks.tsv"}
    with pytest.raises(SpecError, match="a test split never chooses"):
        load_spec(write_spec(tmp_path / "s.yaml", decide_on=["e22"], splits={"e22": {"file": "data/e22/test.tsv"}}))
    with pytest.raises(SpecError, match="which decide_on does not"):
        load_spec(write_spec(tmp_path / "s.yaml", splits={"other": {"file": "x.tsv"}}))
