"""comparisons.ab and comparisons.report: two arms trained back to back seed by seed (a fake trainer and scorer
here; one slow test runs the pipeline's trainer), resumed, refused when the rule moved, minutes compared on one
machine only, the keep rule applied, and test splits scored only after the verdict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from comparisons import ab
from comparisons.ab import ComparisonError, TrainCall, run_comparison
from comparisons.report import group_gains, score_test_splits, write_report
from comparisons.spec import SpecError, load_spec
from corpus.iwslt import read_iwslt, write_iwslt
from corpus.text import normalize_transcript
from evaluation.scoring import score_labels
from tests.fixture_corpus import TINY_BLSTM, TINY_TRAIN, draw_settings, talk_text, write_feature_cache

#: each arm's errors: every n-th mark of the reference predicted as O (a seed moves which ones)
DROP_EVERY = {"A": 3, "B": 5}
MINUTES = {"A": 10.0, "B": 12.0}


def params_of(features: str) -> dict:
    return {"profile": "tiny", "experiments": {"x": {"features": features}},
            "evaluate": {"test_splits": ["ref", "asr"], "window": 30, "stride": 15, "batch_size": 16, "device": "cpu"},
            "audio": {"dev_pseudo_talk_tokens": 150}, "train": {**TINY_TRAIN, "epochs": 1, "eval_every_steps": 10},
            "experiment_defs": {"x": {"model": TINY_BLSTM}}, "profiles": {"tiny": {"train": {}, "experiments": {}}},
            "tunings": {"t": {"from": "x", "features": "word", "train": {"max_steps": 5, "lr": 0.001}}}}


def write_setup(root: Path, *, features: str = "feats", keep_rule: dict | None = None, **spec_changes) -> Path:
    (root / "prepared").mkdir(parents=True, exist_ok=True)
    for split, seed in (("dev", 11), ("ref", 12)):
        words, labels = normalize_transcript(talk_text(seed, 250))
        write_iwslt(root / "prepared" / f"{split}.tsv", words, labels)
    (root / "params.yaml").write_text(yaml.safe_dump(params_of(features)), encoding="utf-8")
    spec = {"question": "Is B better?", "params": str(root / "params.yaml"), "prepared": str(root / "prepared"),
            "arms": {"A": {"what": "the old chain", "overrides": ["train.lr=0.004"],
                           "train": [{"experiment": "x"}, {"tuning": "t", "features": features}]},
                     "B": {"what": "the new model", "overrides": [], "train": [{"experiment": "x"}]}},
            "seeds": [1, 2, 3], "decide_on": ["dev"], "bootstrap": {"resamples": 300, "seed": 5},
            "keep_rule": keep_rule or {"min_effect": 1.0, "interval_above_zero": True, "every_seed": True,
                                       "max_extra_minutes": 5}}
    spec.update(spec_changes)
    path = root / "specs" / "cmp.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


class FakeTrainer:
    """Writes a model directory naming its arm and seed, and reports the arm's minutes."""

    def __init__(self, fail_at: str | None = None):
        self.calls: list[tuple[str, int, str]] = []
        self.fail_at = fail_at

    def __call__(self, call: TrainCall) -> dict:
        self.calls.append((call.arm, call.seed, call.name))
        if call.stage == self.fail_at:
            raise ComparisonError(f"{call.stage} killed")
        call.model_dir.mkdir(parents=True, exist_ok=True)
        (call.model_dir / "config.json").write_text(json.dumps({"arm": call.arm, "seed": call.seed}))
        return {"process_seconds": 1.0, "trainer": {"wall_seconds": 60 * MINUTES[call.arm] / (
            2 if call.arm == "A" else 1)}, "numerics": {"floor": "x86-64-v3"}}


def fake_scorer(root: Path):
    reference = read_iwslt(root / "prepared" / "dev.tsv").labels

    def scorer(model_dir: Path, words, evaluate, timing=None) -> list[str]:
        made = json.loads((model_dir / "config.json").read_text())
        scorer.timings.append(timing)
        every = DROP_EVERY[made["arm"]]
        marks = [i for i, label in enumerate(reference) if label != "O"]
        dropped = {i for n, i in enumerate(marks) if (n + made["seed"]) % every == 0}
        assert len(words) == len(reference) and evaluate["batch_size"] == 16
        return ["O" if i in dropped else label for i, label in enumerate(reference)]
    scorer.timings = []
    return scorer


def run(root: Path, spec_path: Path, trainer=None, **kwargs):
    return run_comparison(load_spec(spec_path), work=root / "work", out=root / "out",
                          runner=trainer or FakeTrainer(), scorer=fake_scorer(root), log=lambda _: None, **kwargs)


def test_both_arms_train_back_to_back_seed_by_seed_and_b_is_kept(tmp_path):
    spec_path = write_setup(tmp_path)
    trainer = FakeTrainer()
    results = run(tmp_path, spec_path, trainer)
    assert trainer.calls == [("A", 1, "x"), ("A", 1, "t"), ("B", 1, "x"), ("A", 2, "x"), ("A", 2, "t"),
                             ("B", 2, "x"), ("A", 3, "x"), ("A", 3, "t"), ("B", 3, "x")]
    assert len(results) == 6 and {r["minutes"] for r in results} == {10.0, 12.0}
    first = next(r for r in results if (r["arm"], r["seed"]) == ("A", 1))
    assert first["chain"][0]["train"]["lr"] == 0.004 and first["model_dir"].endswith("variant_artifacts/t/x/model")
    assert first["machine"] == ab.machine() and first["scores"]["dev"]["talks"]["count"] > 5
    predictions = tmp_path / "work" / "cmp" / "A" / "seed1" / "predictions" / "dev.tsv"
    assert read_iwslt(predictions).words == read_iwslt(tmp_path / "prepared" / "dev.tsv").words
    summary = write_report(load_spec(spec_path), tmp_path / "out")
    assert summary["verdict"]["keep"] == "B" and summary["extra_minutes"] == 2.0
    assert all(gain > 1.0 for gain in summary["splits"]["dev"]["gains"])
    text = (tmp_path / "out" / "cmp.md").read_text()
    assert text.index("| seed | A dev F1 | B dev F1 | dev B − A | A min | B min | machine |") < text.index(
        "dev: B − A") < text.index("Verdict: **keep B**")
    assert json.loads((tmp_path / "out" / "cmp.json").read_text())["verdict"]["keep"] == "B"


def test_a_run_resumes_where_it_stopped(tmp_path):
    spec_path = write_setup(tmp_path, seeds=[1])
    with pytest.raises(ComparisonError, match="tune@t killed"):
        run(tmp_path, spec_path, FakeTrainer(fail_at="tune@t"))
    trainer = FakeTrainer()
    run(tmp_path, spec_path, trainer)
    assert trainer.calls == [("A", 1, "t"), ("B", 1, "x")]  # the fine-tuning finished before: not trained again
    again = FakeTrainer()
    results = run(tmp_path, spec_path, again)
    assert again.calls == [] and len(results) == 2
    (tmp_path / "out" / "cmp" / "B_seed1.json").unlink()  # a result lost: scored again, its model not retrained
    assert len(run(tmp_path, spec_path, again)) == 2 and again.calls == []
    (tmp_path / "out" / "cmp" / "A_seed1.json").unlink()  # the fine-tuning gone: the tuning from it trained again
    shutil.rmtree(tmp_path / "work" / "cmp" / "A" / "seed1" / "artifacts")
    run(tmp_path, spec_path, again)
    assert again.calls == [("A", 1, "x"), ("A", 1, "t")]


def test_a_rule_cannot_move_after_a_result_exists(tmp_path):
    spec_path = write_setup(tmp_path, seeds=[1, 2])
    run(tmp_path, spec_path, seeds=[1])
    write_setup(tmp_path, seeds=[1, 2], question="Reworded: is B better?")  # free text: fine, and said
    run(tmp_path, spec_path, seeds=[1])
    write_report(load_spec(spec_path), tmp_path / "out")
    assert "the same rule, other free text" in (tmp_path / "out" / "cmp.md").read_text()
    write_setup(tmp_path, seeds=[1, 2], keep_rule={"min_effect": 0.2, "interval_above_zero": True,
                                                   "every_seed": True, "max_extra_minutes": 5})
    with pytest.raises(ComparisonError, match="decision rule changed after"):
        run(tmp_path, spec_path)
    with pytest.raises(ComparisonError, match="decision rule changed after"):
        write_report(load_spec(spec_path), tmp_path / "out")


def test_an_arm_whose_params_changed_under_finished_seeds_is_refused(tmp_path):
    spec_path = write_setup(tmp_path, seeds=[1, 2])
    run(tmp_path, spec_path, seeds=[1])
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["experiment_defs"]["x"]["model"]["hidden"] = 32
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ComparisonError, match="arm A now resolves to other settings"):
        run(tmp_path, spec_path)
    with pytest.raises(Exception, match="not the spec's"):
        run(tmp_path, spec_path, seeds=[7])


def test_minutes_of_two_machines_are_not_compared(tmp_path, monkeypatch):
    spec_path = write_setup(tmp_path)
    machines = iter([{"cpu": "Zen 4", "cores": 2}] * 3 + [{"cpu": "Xeon", "cores": 2}] * 6)
    monkeypatch.setattr(ab, "machine", lambda: next(machines))
    run(tmp_path, spec_path)
    summary = write_report(load_spec(spec_path), tmp_path / "out")
    timed = [row["timed"] for row in summary["seeds"]]
    assert timed == [True, True, True]
    # seed 1: A on the Zen 4 (both steps), B on the Xeon: reported, not timed
    spec_path = write_setup(tmp_path / "mixed")
    moves = iter(["Zen 4", "Zen 4", "Xeon"] + ["Zen 4"] * 6)
    monkeypatch.setattr(ab, "machine", lambda: {"cpu": next(moves), "cores": 2})
    run(tmp_path / "mixed", spec_path)
    summary = write_report(load_spec(spec_path), tmp_path / "mixed" / "out")
    assert [row["timed"] for row in summary["seeds"]] == [False, True, True] and summary["timed_seeds"] == 2
    assert "(not timed)" in (tmp_path / "mixed" / "out" / "cmp.md").read_text()


def test_a_machine_is_its_cpu_generation_not_only_its_model_name(monkeypatch):
    """Two generations of "AMD EPYC" are two machines: family and model numbers and AVX-512 tell them apart."""
    from comparisons.report import machine_label

    def cpuinfo(family: str, model: str):
        return lambda field: {"cpu family": family, "model\t": model}.get(field)

    monkeypatch.setattr(ab, "cpu_model", lambda: "AMD EPYC")
    monkeypatch.setattr(ab, "_cpuinfo", cpuinfo("23", "49"))
    monkeypatch.setattr(ab, "cpu_flags", lambda: {"avx2", "fma"})
    zen2 = ab.machine()
    assert {k: zen2[k] for k in ("cpu", "family", "model", "avx512")} == {
        "cpu": "AMD EPYC", "family": 23, "model": 49, "avx512": False}
    monkeypatch.setattr(ab, "_cpuinfo", cpuinfo("25", "17"))
    monkeypatch.setattr(ab, "cpu_flags", lambda: {"avx2", "fma", "avx512f"})
    zen4 = ab.machine()
    assert zen4 != zen2 and machine_label(zen4).endswith("AVX-512")
    assert machine_label({**zen2, "cores": 2}) == "AMD EPYC (family 23, model 49), 2 cores, no AVX-512"
    monkeypatch.setattr(ab, "_cpuinfo", lambda field: None)  # no /proc/cpuinfo: no numbers claimed
    monkeypatch.setattr(ab, "cpu_flags", lambda: None)
    assert "family" not in ab.machine() and ab.machine()["avx512"] is False
    assert machine_label({"cpu": "AMD EPYC", "cores": 2}) == "AMD EPYC, 2 cores"  # results written before


def test_no_verdict_until_every_seed_or_without_one_timed_seed(tmp_path, monkeypatch):
    spec_path = write_setup(tmp_path)
    run(tmp_path, spec_path, seeds=[1, 2])
    summary = write_report(load_spec(spec_path), tmp_path / "out")
    assert summary["verdict"] == {"keep": None, "checks": [], "why": "not decided: 2 of 3 seeds have both arms"}
    moves = iter(["Zen 4", "Zen 4", "Xeon"] * 3)
    monkeypatch.setattr(ab, "machine", lambda: {"cpu": next(moves), "cores": 2})
    spec_path = write_setup(tmp_path / "apart")
    run(tmp_path / "apart", spec_path)
    assert write_report(load_spec(spec_path), tmp_path / "apart" / "out")["verdict"]["keep"] is None


@pytest.mark.parametrize("keep_rule, failing", [
    ({"min_effect": 50.0, "interval_above_zero": True, "every_seed": True, "max_extra_minutes": 5}, "mean gain"),
    ({"min_effect": 1.0, "interval_above_zero": True, "every_seed": True, "max_extra_minutes": 1}, "minutes"),
])
def test_b_is_not_kept_when_a_part_of_the_rule_fails(tmp_path, keep_rule, failing):
    spec_path = write_setup(tmp_path, keep_rule=keep_rule)
    run(tmp_path, spec_path)
    decided = write_report(load_spec(spec_path), tmp_path / "out")["verdict"]
    assert decided["keep"] == "A" and failing in decided["why"]
    assert decided["why"].startswith("B not kept, these parts fail: ")


def test_test_splits_are_scored_only_after_the_verdict_and_choose_nothing(tmp_path):
    spec_path = write_setup(tmp_path)
    spec = load_spec(spec_path)
    evaluated = []

    def evaluate(model_dir, prepared, predictions, *, splits, batch_size, device):
        evaluated.append((model_dir, splits))
        return {split: {"OVERALL": {"f1": 0.5}} for split in splits}

    run(tmp_path, spec_path, seeds=[1])
    write_report(spec, tmp_path / "out")
    with pytest.raises(ComparisonError, match="no verdict of this rule yet"):
        score_test_splits(spec, tmp_path / "out", tmp_path / "work", evaluate=evaluate)
    run(tmp_path, spec_path)
    write_report(spec, tmp_path / "out")
    with pytest.raises(ComparisonError, match="'dev' is not a test split"):
        score_test_splits(spec, tmp_path / "out", tmp_path / "work", ["dev"], evaluate=evaluate)
    summary = score_test_splits(spec, tmp_path / "out", tmp_path / "work", evaluate=evaluate)
    assert len(evaluated) == 6 and all(splits == ["ref", "asr"] for _, splits in evaluated)
    assert summary["verdict"]["keep"] == "B"  # unchanged by what the test splits say
    text = (tmp_path / "out" / "cmp.md").read_text()
    assert text.index("Verdict:") < text.index("## Test splits: reported, not used to choose")
    assert "| 1 | 50.0 | 50.0 | 50.0 | 50.0 |" in text


def test_a_step_is_the_pipelines_training_command(tmp_path, monkeypatch):
    """The command parses as the stage's own and lays its outputs out as dvc.yaml does."""
    from pipeline import train as stage

    monkeypatch.setattr(stage, "exit_with_parent", lambda: None)  # not for the test process

    call = TrainCall("A", 2, "tuning", "t", "x", tmp_path / "p.yaml", tmp_path / "feats", tmp_path / "A" / "seed2")
    argv = call.argv()
    assert argv[1:3] == ["-m", "pipeline.train"] and argv[-2:] == ["--set", "seed=2"]
    assert call.model_dir == tmp_path / "A" / "seed2" / "variant_artifacts" / "t" / "x" / "model"
    assert argv[argv.index("--source-artifacts") + 1] == str(tmp_path / "A" / "seed2" / "artifacts")
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params_of("feats")))
    assert stage.main(argv[3:]) == 2  # parsed; no such features: the stage's clear error, not argparse's


@pytest.mark.slow  # three tiny trainings in fresh processes, each model scored through Punctuator
def test_a_comparison_trains_through_the_pipelines_trainer(tmp_path):
    features = write_feature_cache(tmp_path / "corpus", talks=12, sentences_per_talk=15, train_tokens=1500)
    spec_path = write_setup(tmp_path, features=str(features), seeds=[1], prepared=str(features.parent / "prepared"),
                            keep_rule={"min_effect": 0.0, "interval_above_zero": False, "every_seed": False,
                                       "max_extra_minutes": None})
    results = run_comparison(load_spec(spec_path), work=tmp_path / "work", out=tmp_path / "out",
                             log=lambda _: None)
    assert {(r["arm"], len(r["chain"])) for r in results} == {("A", 2), ("B", 1)}
    for result in results:
        assert all(step["timings"]["wall_seconds"] > 0 and step["numerics"]["cpu"] for step in result["chain"])
        config = json.loads((Path(result["model_dir"]) / "config.json").read_text())
        assert config["train"]["seed"] == 1 and 0 <= result["scores"]["dev"]["OVERALL"]["f1"] <= 1
    assert write_report(load_spec(spec_path), tmp_path / "out")["verdict"]["keep"] in ("A", "B")


def test_the_command_line_reports_and_refuses_clearly(tmp_path, capsys):
    import ast

    from comparisons import __main__ as cli

    spec_path = write_setup(tmp_path)
    run(tmp_path, spec_path)
    assert cli.main(["report", str(spec_path), "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")]) == 0
    assert "verdict: every part of the keep rule holds" in capsys.readouterr().out
    write_setup(tmp_path / "bad", decide_on=["dev", "ref"])
    assert cli.main(["run", str(tmp_path / "bad" / "specs" / "cmp.yaml")]) == 2
    assert "a test split never chooses" in capsys.readouterr().err
    # the numerics are pinned before anything loads numpy or torch
    body = ast.parse(Path(cli.__file__).read_text()).body[1:3]
    assert ast.unparse(body[0]) == "from experiments.numerics import pin_numerics"
    assert ast.unparse(body[1]) == "pin_numerics()"


def test_every_decision_split_decides_each_with_its_own_talks(tmp_path):
    spec_path = write_setup(tmp_path, seeds=[1, 2], decide_on=["dev", "calls_dev"], splits={"calls_dev": {
        "file": str(tmp_path / "prepared" / "dev.tsv"), "talks": str(tmp_path / "calls_dev_talks.tsv")}})
    tokens = len(read_iwslt(tmp_path / "prepared" / "dev.tsv").words)
    (tmp_path / "calls_dev_talks.tsv").write_text(
        "talk\tfirst_token\ttokens\n" + "".join(f"call{n}\t{n * 400}\t{min(400, tokens - n * 400)}\n"
                                                for n in range((tokens + 399) // 400)), encoding="utf-8")
    run(tmp_path, spec_path)
    summary = write_report(load_spec(spec_path), tmp_path / "out")
    assert list(summary["splits"]) == ["dev", "calls_dev"] and summary["verdict"]["keep"] == "B"
    assert summary["splits"]["calls_dev"]["bootstrap"]["talks"] == (tokens + 399) // 400
    assert summary["splits"]["calls_dev"]["talks"].endswith("calls_dev_talks.tsv")
    assert sum(check["rule"].startswith("calls_dev:") for check in summary["verdict"]["checks"]) == 3
    assert "| A dev F1 | B dev F1 | A calls_dev F1 | B calls_dev F1 |" in (tmp_path / "out" / "cmp.md").read_text()


def test_a_comparisons_gain_is_pooled_within_groups_of_named_talks(tmp_path):
    spec_path = write_setup(tmp_path, seeds=[1, 2], decide_on=["dev", "calls_dev"], splits={"calls_dev": {
        "file": str(tmp_path / "prepared" / "dev.tsv"), "talks": str(tmp_path / "calls_dev_talks.tsv")}})
    reference = read_iwslt(tmp_path / "prepared" / "dev.tsv").labels
    tokens = len(reference)
    (tmp_path / "calls_dev_talks.tsv").write_text(
        "talk\tfirst_token\ttokens\n" + "".join(f"call{n}\t{n * 400}\t{min(400, tokens - n * 400)}\n"
                                                for n in range((tokens + 399) // 400)), encoding="utf-8")
    run(tmp_path, spec_path)
    spec = load_spec(spec_path)
    results = ab.read_results(spec, tmp_path / "out")
    groups = {"first two": ["call0", "call1"], "all": [f"call{n}" for n in range((tokens + 399) // 400)]}
    pooled = group_gains(spec, results, "calls_dev", groups)
    assert pooled["seeds"] == [1, 2] and pooled["groups"]["first two"]["tokens"] == 800
    for seed in (1, 2):
        for arm in ("A", "B"):
            predicted = read_iwslt(tmp_path / "work" / "cmp" / arm / f"seed{seed}" / "predictions"
                                   / "calls_dev.tsv").labels
            expected = 100 * score_labels(reference[:800], predicted[:800])["OVERALL"]["f1"]
            assert pooled["groups"]["first two"]["f1"][arm][seed - 1] == pytest.approx(expected, abs=1e-3)
    # every talk in one group gives the comparison's own figures back
    summary = write_report(spec, tmp_path / "out")
    assert pooled["groups"]["all"]["gains"] == pytest.approx(summary["splits"]["calls_dev"]["gains"], abs=2e-3)
    assert pooled["groups"]["all"]["bootstrap"]["low"] == pytest.approx(
        summary["splits"]["calls_dev"]["bootstrap"]["low"])
    with pytest.raises(ComparisonError, match="does not hold: call99"):
        group_gains(spec, results, "calls_dev", {"x": ["call0", "call99"]})
    with pytest.raises(ComparisonError, match="dev: the spec names no talks file"):
        group_gains(spec, results, "dev", {"x": ["call0"]})


def test_a_split_with_timings_gives_the_scorer_its_cues_and_a_bounded_loss_decides(tmp_path):
    """A split named twice, once with raw timing cues; a per-split rule: a gain asked on one, a loss bounded on
    the other."""
    import numpy as np

    spec_path = write_setup(tmp_path, decide_on=["dev", "dev_timed"],
                            splits={"dev_timed": {"file": str(tmp_path / "prepared" / "dev.tsv"),
                                                  "timing": str(tmp_path / "dev_timing.npy")}},
                            keep_rule={"min_effect": {"dev": -0.5, "dev_timed": 1.0}, "interval_above_zero": True,
                                       "every_seed": True, "max_extra_minutes": None})
    words = read_iwslt(tmp_path / "prepared" / "dev.tsv").words
    cues = np.tile(np.asarray([[0.3, 0.1, 0.0]], dtype=np.float32), (len(words), 1))
    np.save(tmp_path / "dev_timing.npy", cues)
    scorer = fake_scorer(tmp_path)
    run_comparison(load_spec(spec_path), work=tmp_path / "work", out=tmp_path / "out", runner=FakeTrainer(),
                   scorer=scorer, log=lambda _: None)
    given = [timing for timing in scorer.timings if timing is not None]
    assert len(given) == 6 and all(np.array_equal(timing, cues) for timing in given)
    assert sum(timing is None for timing in scorer.timings) == 6  # the split without timing gets none
    summary = write_report(load_spec(spec_path), tmp_path / "out")
    checks = [check["rule"] for check in summary["verdict"]["checks"]]
    assert any(rule.startswith("dev: mean gain") and "at least -0.5 F1" in rule for rule in checks)
    assert any(rule.startswith("dev_timed: the 95 % interval") and "above +0" in rule for rule in checks)
    assert summary["verdict"]["keep"] == "B"
    np.save(tmp_path / "dev_timing.npy", cues[:-1])  # cues that are not the split's tokens
    (tmp_path / "out" / "cmp").rename(tmp_path / "out" / "old")
    with pytest.raises(ComparisonError, match="holds cues of shape"):
        run_comparison(load_spec(spec_path), work=tmp_path / "work2", out=tmp_path / "out", runner=FakeTrainer(),
                       scorer=scorer, log=lambda _: None)


def test_a_loss_beyond_its_bound_is_not_kept(tmp_path):
    """B gains on one split and loses more than the bound on the other: A is kept, the loss named."""
    spec_path = write_setup(tmp_path, decide_on=["dev", "dev_again"],
                            splits={"dev_again": {"file": str(tmp_path / "prepared" / "dev.tsv")}},
                            keep_rule={"min_effect": {"dev": 1.0, "dev_again": 1.0}, "interval_above_zero": True,
                                       "every_seed": True, "max_extra_minutes": None})
    run(tmp_path, spec_path)
    kept = write_report(load_spec(spec_path), tmp_path / "out")
    assert kept["verdict"]["keep"] == "B"
    # the same results judged by a rule where B (the better arm here) had to lose at most -30 on a split
    # and gain 30 on the other: A is kept, the failing gain named
    spec = load_spec(spec_path)
    import dataclasses

    from comparisons.report import verdict
    from comparisons.spec import KeepRule
    stricter = dataclasses.replace(spec, keep=KeepRule({"dev": 30.0, "dev_again": -30.0}, True, True, None))
    decided = verdict(stricter, kept)
    assert decided["keep"] == "A" and "dev: mean gain" in decided["why"] and "dev_again" not in decided["why"]


def test_an_arm_of_tunings_starts_from_a_model_trained_before(tmp_path):
    """An arm with source_artifacts tunes a model it does not train; the model's weights are in its settings."""
    source = tmp_path / "trained" / "x" / "model"
    source.mkdir(parents=True)
    (source / "model.pt").write_bytes(b"weights")
    spec_path = write_setup(tmp_path, arms={
        "A": {"what": "tuned on words", "source_artifacts": str(tmp_path / "trained"), "train": [{"tuning": "t"}]},
        "B": {"what": "tuned again", "source_artifacts": str(tmp_path / "trained"),
              "overrides": ["tunings.t.train.lr=0.002"], "train": [{"tuning": "t"}]}}, seeds=[1])
    trainer = FakeTrainer()
    results = run(tmp_path, spec_path, trainer)
    assert trainer.calls == [("A", 1, "t"), ("B", 1, "t")]
    step = results[0]["chain"][0]
    assert step["source_model"] == str(source) and len(step["source_model_sha256"]) == 64
    call = TrainCall("A", 1, "tuning", "t", "x", tmp_path / "p.yaml", tmp_path / "f", tmp_path / "w",
                     tmp_path / "trained")
    assert call.argv()[call.argv().index("--source-artifacts") + 1] == str(tmp_path / "trained")
    (source / "model.pt").write_bytes(b"other weights")  # the start changed under a finished seed: refused
    with pytest.raises(ComparisonError, match="now resolves to other settings"):
        run(tmp_path, spec_path, FakeTrainer())


def test_a_training_another_comparison_made_is_reused_not_repeated(tmp_path):
    """Two specs with an arm of the same settings, features and seed: the second copies the first's model."""
    spec_path = write_setup(tmp_path, seeds=[1])
    run(tmp_path, spec_path)
    other = yaml.safe_load(spec_path.read_text())
    other["arms"]["A"] = other["arms"]["B"]  # today's model against a new one
    other["arms"]["B"] = {"what": "a new model", "overrides": ["train.lr=0.0005"], "train": [{"experiment": "x"}]}
    other_path = spec_path.with_name("other.yaml")
    other_path.write_text(yaml.safe_dump(other), encoding="utf-8")
    trainer = FakeTrainer()
    results = run(tmp_path, other_path, trainer)
    assert trainer.calls == [("B", 1, "x")]  # A is cmp's B of seed 1: reused
    reused = next(r for r in results if r["arm"] == "A")
    assert reused["chain"][0]["reused_from"].endswith("cmp/B/seed1/artifacts/x/model")
    assert reused["minutes"] == MINUTES["B"]  # its minutes are the training's own, on its machine


class FakeDrawMaker:
    """Writes a draw's manifest naming what it was drawn from, as the draw stage's features would."""

    def __init__(self):
        self.calls: list[tuple[str, object]] = []

    def __call__(self, params: dict, name: str, out: Path) -> dict:
        self.calls.append((name, params["draws"][name]))
        (out / "features").mkdir(parents=True, exist_ok=True)
        (out / "features" / "manifest.json").write_text(json.dumps({"draw": params["draws"][name]}))
        return {"draw": name, "tokens": params["draws"][name]}


def draw_setup(root: Path, base_draws: dict, arm_b: dict) -> Path:
    spec_path = write_setup(root, seeds=[1])
    params = yaml.safe_load((root / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump({**params, "draws": base_draws}))
    spec = yaml.safe_load(spec_path.read_text())
    spec["arms"]["B"] = arm_b
    spec_path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return spec_path


def test_a_draw_only_an_arm_defines_is_made_from_its_params_before_it_trains(tmp_path, monkeypatch):
    """Arm B adds draws.more and reads it: the run draws it into data/draws/more from B's params (its metrics beside
    B's params), before any training, and once per run; A reads the pipeline's draw, which the run leaves alone."""
    monkeypatch.chdir(tmp_path)
    spec_path = draw_setup(tmp_path, {"long": 900}, {
        "what": "more text", "overrides": ["+draws.more={tokens: 1200}"],
        "train": [{"experiment": "x", "features": "data/draws/more/features"}]})
    draws, order = FakeDrawMaker(), []
    trainer = FakeTrainer()
    results = run_comparison(load_spec(spec_path), work=tmp_path / "work", out=tmp_path / "out",
                             runner=lambda call: order.append(("train", len(draws.calls))) or trainer(call),
                             scorer=fake_scorer(tmp_path), draw_maker=draws, log=lambda _: None)
    assert draws.calls == [("more", {"tokens": 1200})] and order[0] == ("train", 1)
    assert json.loads((tmp_path / "work" / "cmp" / "B" / "draw_more.json").read_text())["draw"] == "more"
    b = next(r for r in results if r["arm"] == "B")
    assert b["chain"][0]["features"] == "data/draws/more/features" and b["chain"][0]["features_manifest_sha256"]
    assert not (tmp_path / "data" / "draws" / "long").exists()


def test_an_arm_that_redefines_the_pipelines_draw_or_two_arms_one_draw_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    reads_long = {"experiment": "x", "features": "data/draws/long/features"}
    spec_path = draw_setup(tmp_path, {"long": 900}, {"what": "longer", "overrides": ["draws.long=2000"],
                                                    "train": [reads_long]})
    draws = FakeDrawMaker()
    with pytest.raises(SpecError, match=r"arm B changes draws\.long of .*draw@long writes data/draws/long"):
        run_comparison(load_spec(spec_path), work=tmp_path / "work", out=tmp_path / "out", runner=FakeTrainer(),
                       scorer=fake_scorer(tmp_path), draw_maker=draws, log=lambda _: None)
    spec = yaml.safe_load(spec_path.read_text())
    reads_own = {"experiment": "x", "features": "data/draws/own/features"}
    spec["arms"]["A"] = {"what": "own", "overrides": ["+draws.own=1000"], "train": [reads_own]}
    spec["arms"]["B"] = {"what": "own, longer", "overrides": ["+draws.own=2000"], "train": [reads_own]}
    spec_path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    with pytest.raises(SpecError, match=r"arms A and B both read data/draws/own, drawn from other settings"):
        run_comparison(load_spec(spec_path), work=tmp_path / "work", out=tmp_path / "out", runner=FakeTrainer(),
                       scorer=fake_scorer(tmp_path), draw_maker=draws, log=lambda _: None)
    assert draws.calls == [("own", 1000)]  # A's was drawn before B's was found to differ; nothing trained


def test_the_draw_maker_draws_as_the_draw_stage_does(tmp_path):
    """make_params_draw on a tiny corpus: the draw's words and features where the stage writes them, its metrics
    the stage's (tokens, talks, exclusions); a draw that is no count of tokens is named."""
    data, embed = draw_settings(tmp_path)
    params = {"data": data, "embed": embed, "draws": {"own": 2000, "bad": "2k"}}
    metrics = ab.make_params_draw(params, "own", tmp_path / "draws" / "own")
    assert (tmp_path / "draws" / "own" / "features" / "manifest.json").is_file()
    assert 1000 < metrics["tokens"]["train"] <= 2000 and "Talk_4" in json.dumps(metrics["exclusions"])
    with pytest.raises(SpecError, match=r"draws\.bad is"):
        ab.make_params_draw(params, "bad", tmp_path / "draws" / "bad")
