"""Training loop: exact resume after an interruption, fingerprint checks, schedule, determinism."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from tests.fixture_corpus import TINY_MODEL, TINY_TRAIN, write_feature_cache
from training import Budget, epoch_plan, train_model, training_fingerprint, transformer_schedule
from training.batches import linear_schedule, lr_schedule
from training.config import ConfigError, TrainConfig
from training.loop import CHECKPOINT_FILE
from training.model_output import HISTORY_FILE, dev_evaluations

TRAIN = {**TINY_TRAIN, "epochs": 2, "eval_every_steps": 8}


@pytest.fixture(scope="module")
def features(tmp_path_factory):
    return write_feature_cache(tmp_path_factory.mktemp("training"), talks=20, sentences_per_talk=20,
                               train_tokens=2500)


def weights(model_dir):
    return torch.load(model_dir / "model.pt", weights_only=True)


@pytest.mark.slow  # two whole training runs and a resumed one
def test_interrupted_training_resumes_to_the_same_model(features, tmp_path):
    straight = train_model(features, tmp_path / "a", tmp_path / "a_state", model_config=TINY_MODEL,
                           train_config=TRAIN, window=30, stride=15)
    first = train_model(features, tmp_path / "b", tmp_path / "b_state", model_config=TINY_MODEL,
                        train_config=TRAIN, window=30, stride=15, budget=Budget(steps=5))
    assert first.metrics == {"completed": False, "steps": 5}
    assert not (tmp_path / "b" / "model.pt").exists()
    resumed = train_model(features, tmp_path / "b", tmp_path / "b_state", model_config=TINY_MODEL,
                          train_config=TRAIN, window=30, stride=15)
    assert resumed.metrics["steps"] == straight.metrics["steps"]
    assert resumed.metrics["best_dev_f1"] == straight.metrics["best_dev_f1"]
    a, b = weights(tmp_path / "a"), weights(tmp_path / "b")
    assert all(torch.equal(a[name], b[name]) for name in a)
    history_a = (tmp_path / "a" / "history.csv").read_text()
    assert history_a == (tmp_path / "b" / "history.csv").read_text()


def test_a_paused_run_counts_every_call_s_wall_time(features, tmp_path):
    first = train_model(features, tmp_path / "m", tmp_path / "state", model_config=TINY_MODEL, train_config=TRAIN,
                        window=30, stride=15, budget=Budget(steps=9))
    assert first.metrics == {"completed": False, "steps": 9}
    paused = torch.load(tmp_path / "state" / CHECKPOINT_FILE, weights_only=False)["state"]
    assert paused["wall_seconds"] >= paused["train_seconds"] + paused["eval_seconds"] > 0  # in the checkpoint
    resumed = train_model(features, tmp_path / "m", tmp_path / "state", model_config=TINY_MODEL, train_config=TRAIN,
                          window=30, stride=15)
    timings = resumed.timings
    assert resumed.metrics["completed"] and resumed.metrics["steps"] > 9
    # the paused call's wall is in the checkpoint it resumed from: every call's steps, evaluations and checkpoints
    # lie inside the wall time of both (rounded to a tenth of a second each)
    inside = timings["train_seconds"] + timings["eval_seconds"] + timings["checkpoint_seconds"]
    assert timings["wall_seconds"] >= inside - 0.3 and timings["wall_seconds"] > paused["wall_seconds"]


def test_a_runs_dev_evaluations_are_counted_from_its_history_epoch_ends_included(features, tmp_path):
    result = train_model(features, tmp_path / "m", tmp_path / "state", model_config=TINY_MODEL, train_config=TRAIN,
                         window=30, stride=15)
    with open(tmp_path / "m" / HISTORY_FILE, newline="", encoding="utf-8") as handle:
        evaluated = [int(row["step"]) for row in csv.DictReader(handle) if row["dev_f1"] != ""]
    steps = result.metrics["steps"]
    on_schedule = list(range(TRAIN["eval_every_steps"], steps + 1, TRAIN["eval_every_steps"]))
    epoch_ends = sorted(set(evaluated) - set(on_schedule))  # the first epoch's end, off the schedule, and the run's
    assert set(on_schedule) < set(evaluated) and epoch_ends and epoch_ends[-1] == steps
    assert dev_evaluations(tmp_path / "m" / HISTORY_FILE) == len(evaluated) == len(on_schedule) + len(epoch_ends)


def test_a_checkpoint_from_another_configuration_is_not_reused(features, tmp_path):
    train_model(features, tmp_path / "m", tmp_path / "state", model_config=TINY_MODEL, train_config=TRAIN,
                window=30, stride=15, budget=Budget(steps=5))
    changed = {**TRAIN, "lr": 0.001}
    result = train_model(features, tmp_path / "m", tmp_path / "state", model_config=TINY_MODEL,
                         train_config=changed, window=30, stride=15)
    reference = train_model(features, tmp_path / "fresh", tmp_path / "fresh_state", model_config=TINY_MODEL,
                            train_config=changed, window=30, stride=15)
    assert result.metrics["steps"] == reference.metrics["steps"]
    a, b = weights(tmp_path / "m"), weights(tmp_path / "fresh")
    assert all(torch.equal(a[name], b[name]) for name in a)  # started afresh, not from the stale checkpoint


def test_model_directory_records_what_it_was_trained_with(features, tmp_path):
    train_model(features, tmp_path / "m", tmp_path / "s", model_config=TINY_MODEL, train_config=TRAIN,
                window=30, stride=15)
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["model"] == TINY_MODEL and config["train"] == TRAIN
    assert config["labels"] == ["O", "COMMA", "PERIOD", "QUESTION"]
    assert config["window"] == 30 and config["vector_dim"] == 8


def test_transformer_schedule_warms_up_then_decays():
    multiplier = transformer_schedule(100)
    assert multiplier(1) == pytest.approx(0.01)
    assert multiplier(100) == pytest.approx(1.0)
    assert multiplier(400) == pytest.approx(0.5)


def test_linear_schedule_warms_up_then_falls_to_zero_at_the_last_step():
    multiplier = linear_schedule(10, 110)
    assert multiplier(5) == pytest.approx(0.5)
    assert multiplier(10) == pytest.approx(1.0)
    assert multiplier(60) == pytest.approx(0.5)
    assert multiplier(110) == 0.0 and multiplier(500) == 0.0
    assert lr_schedule("rsqrt", 100, 1000)(400) == transformer_schedule(100)(400)
    with pytest.raises(ValueError, match="unknown lr_schedule"):
        lr_schedule("cosine", 10, 100)


def test_exponential_schedule_decays_to_a_tenth_at_the_last_step():
    multiplier = lr_schedule("exponential", 10, 110)
    assert multiplier(5) == pytest.approx(0.5)
    assert multiplier(10) == pytest.approx(1.0)
    assert multiplier(60) == pytest.approx(0.1 ** 0.5)  # halfway down, in log space
    assert multiplier(110) == pytest.approx(0.1) and multiplier(500) == pytest.approx(0.1)


def test_constant_schedule_holds_the_peak_after_warm_up():
    multiplier = lr_schedule("constant", 4, 100)
    assert [multiplier(s) for s in (1, 2, 4, 50, 1000)] == [0.25, 0.5, 1.0, 1.0, 1.0]
    assert lr_schedule("constant", 1, 100)(1) == 1.0  # no warm-up: the peak from the first step


def test_lr_schedule_is_checked_and_recorded_only_when_not_the_default():
    with pytest.raises(ConfigError, match="lr_schedule"):
        TrainConfig.from_mapping({**TRAIN, "lr_schedule": "cosine"})
    assert "lr_schedule" not in TrainConfig.from_mapping(TRAIN).as_params()  # older runs keep their fingerprints
    assert TrainConfig.from_mapping({**TRAIN, "lr_schedule": "linear"}).as_params()["lr_schedule"] == "linear"


def test_keep_is_checked_recorded_only_when_last_and_left_out_of_the_fingerprint(features):
    with pytest.raises(ConfigError, match="keep"):
        TrainConfig.from_mapping({**TRAIN, "keep": "median"})
    best, last = TrainConfig.from_mapping(TRAIN), TrainConfig.from_mapping({**TRAIN, "keep": "last"})
    assert "keep" not in best.as_params()  # older runs keep their recorded settings
    assert last.as_params()["keep"] == "last" and "keep" not in last.fingerprinted()
    assert training_fingerprint(TINY_MODEL, last, features) == training_fingerprint(TINY_MODEL, best, features)
    assert training_fingerprint(TINY_MODEL, best.replace(lr=0.001), features) != \
        training_fingerprint(TINY_MODEL, best, features)


def test_keep_last_keeps_a_finished_run_s_last_weights_without_training_it_again(features, tmp_path):
    noisy = {**TRAIN, "lr": 0.1, "eval_every_steps": 2}  # a high rate: the best evaluation is not the last step's
    best = train_model(features, tmp_path / "best", tmp_path / "s", model_config=TINY_MODEL, train_config=noisy,
                       window=30, stride=15)
    assert best.metrics["best_step"] < best.metrics["steps"] and "kept" not in best.metrics
    final = torch.load(tmp_path / "s" / "checkpoint.pt", weights_only=False)["model"]
    # one step of budget: only a run that resumes the finished checkpoint, instead of training again, completes
    last = train_model(features, tmp_path / "last", tmp_path / "s", model_config=TINY_MODEL,
                       train_config={**noisy, "keep": "last"}, window=30, stride=15, budget=Budget(steps=1))
    assert last.metrics["completed"] and last.metrics["steps"] == best.metrics["steps"]
    assert last.metrics["kept"] == {"rule": "last", "step": best.metrics["steps"]}
    assert last.metrics["best_step"] == best.metrics["best_step"]  # the evaluations are still the run's
    kept, chosen = weights(tmp_path / "last"), weights(tmp_path / "best")
    assert all(torch.equal(kept[name], final[name].cpu()) for name in final)
    assert any(not torch.equal(kept[name], chosen[name]) for name in kept)
    recorded = [json.loads((tmp_path / name / "config.json").read_text()) for name in ("best", "last")]
    assert recorded[1]["train"]["keep"] == "last" and "keep" not in recorded[0]["train"]
    assert recorded[0]["fingerprint"] == recorded[1]["fingerprint"]


def test_a_linear_schedule_ends_training_at_a_rate_near_zero(features, tmp_path):
    config = {**TRAIN, "lr_schedule": "linear", "warmup_steps": 2, "max_steps": 12, "eval_every_steps": 4,
              "log_every_steps": 4}
    train_model(features, tmp_path / "m", tmp_path / "s", model_config=TINY_MODEL, train_config=config,
                window=30, stride=15)
    rows = (tmp_path / "m" / "history.csv").read_text().splitlines()[1:]
    rates = [float(row.split(",")[-1]) for row in rows]
    steps = [int(row.split(",")[0]) for row in rows]
    peak = config["lr"]
    assert steps[-1] == 12
    for step, rate in zip(steps, rates):  # the rate after each logged step: the schedule's value for the next
        assert rate == pytest.approx(peak * linear_schedule(2, 12)(step), rel=1e-6)
    assert rates[-1] == 0.0


def test_epoch_plans_are_seeded_and_cover_the_data_once():
    plan = epoch_plan(10_000, 100, 32, seed=1, epoch=0)
    assert [list(b) for b in plan] == [list(b) for b in epoch_plan(10_000, 100, 32, seed=1, epoch=0)]
    starts = sorted(s for batch in plan for s in batch)
    assert len(starts) == len(set(starts)) and all(b - a == 100 for a, b in zip(starts, starts[1:]))
    assert [list(b) for b in plan] != [list(b) for b in epoch_plan(10_000, 100, 32, seed=1, epoch=1)]


@pytest.mark.slow  # FF2 with its pretrained MiniLM stream
def test_a_model_that_reads_words_trains_and_punctuates_through_the_same_loop(features, tmp_path):
    """FF2 tokenises the words itself: the loop, the evaluation and `punctuate` must hand it the words."""
    from inference.punctuator import Punctuator

    ff2 = {"name": "ff2", "pretrained": None, "interaction": True, "use_pretrained_stream": True,
           "use_second_stream": True, "second_dim": 32, "second_layers": 1, "second_heads": 2, "fusion_heads": 2,
           "fusion_ffn": 64, "dropout": 0.1, "rdrop_alpha": 1.0, "max_subwords": 256}
    config = {**TRAIN, "batch_size": 2, "max_steps": 3, "eval_every_steps": 3, "dev_eval_tokens": 60, "lr": 1e-4}
    result = train_model(features, tmp_path / "m", tmp_path / "s", model_config=ff2, train_config=config,
                         window=30, stride=15)
    assert result.metrics["steps"] == 3 and result.metrics["completed"]
    words, labels = Punctuator(tmp_path / "m").punctuate("well the river done the man right " * 10)
    assert len(words) == len(labels) == 70


def test_a_passed_deadline_ends_training_with_a_complete_model_directory(features, tmp_path):
    import time

    result = train_model(features, tmp_path / "m", tmp_path / "s", model_config=TINY_MODEL, train_config=TRAIN,
                         window=30, stride=15, budget=Budget(stop_at=time.monotonic() - 1))
    assert result.metrics["completed"] and result.metrics["stopped_at_deadline"]
    assert result.metrics["steps"] == 0
    assert (tmp_path / "m" / "model.pt").exists() and (tmp_path / "m" / "config.json").exists()
    unbounded = train_model(features, tmp_path / "u", tmp_path / "us", model_config=TINY_MODEL,
                            train_config=TRAIN, window=30, stride=15, budget=Budget(stop_at=time.monotonic() + 3600))
    assert unbounded.metrics["steps"] > 0 and not unbounded.metrics["stopped_at_deadline"]
