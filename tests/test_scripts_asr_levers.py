"""scripts/asr_levers.py: each run's levers put over both phases of the text model, its table against the baseline
of the same seed, and its figure."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import pytest

from experiments.params import experiment_config, load_params, tuning_config
from training.config import TrainConfig
from tests.helpers import REPO, load_script

asr_levers = load_script("asr_levers")


def scores(f1, comma=None):
    cls = {"precision": f1, "recall": f1, "f1": f1}
    return {"COMMA": {**cls, "f1": comma if comma is not None else f1}, "PERIOD": cls, "QUESTION": cls,
            "OVERALL": cls, "SER": 1 - f1}


def result(run, seed, dev, levers=None):
    metrics = {"steps": 10}
    return {"run": run, "seed": seed, "levers": levers or {}, "scores": {"dev": scores(dev, comma=dev - 0.1)},
            "phases": {"minilm": {"metrics": metrics}, "minilm_words": {"metrics": metrics}}}


def test_levers_go_over_both_phases_and_nothing_else():
    params = load_params(REPO / "params.yaml")
    base = asr_levers.run_configs(params, "baseline", {"seed": 2}, {})
    run = asr_levers.run_configs(params, "all", {"seed": 2}, {})
    for phase in ("minilm", "minilm_words"):
        assert run[phase][0] == base[phase][0]  # the model is the same
        assert run[phase][1]["augment_rate"] == 0.15 and run[phase][1]["window_jitter"] == 25
        assert run[phase][1]["decode_combine"] == "sum"
        assert base[phase][1]["seed"] == 2 and run[phase][1]["seed"] == 2
        changed = {key for key in run[phase][1] if run[phase][1][key] != base[phase][1].get(key)}
        assert changed == {"augment_rate", "window_jitter", "decode_combine"}
    # the tuning phase keeps its own budget and rate, not the fine-tuning's
    assert base["minilm_words"][1]["max_steps"] != base["minilm"][1]["max_steps"]


def test_the_paper_rates_are_the_augmentation_run():
    _, levers = asr_levers.RUNS["augment"]
    assert levers == {"augment_rate": 0.15}
    params = load_params(REPO / "params.yaml")
    train = asr_levers.run_configs(params, "augment", {}, {})["minilm"][1]
    assert (train["augment_substitute"], train["augment_delete"]) == (0.4, 0.4)  # insert: the remaining 0.2


def test_table_compares_each_run_with_the_baseline_of_its_own_seed():
    results = [result("baseline", 1, 0.647), result("jitter", 1, 0.652, {"window_jitter": 25}),
               result("baseline", 2, 0.640), result("jitter", 2, 0.639, {"window_jitter": 25})]
    rows = asr_levers.table(results, ["dev"]).splitlines()
    assert rows[0].startswith("| run | seed | levers | dev F1 | dev SER | dev COMMA")
    assert rows[3] == "| jitter | 1 | window_jitter=25 | 65.2 | 34.8 | 55.2 | 65.2 | 65.2 | +0.5 |"
    assert rows[5].endswith("| 63.9 | 36.1 | 53.9 | 63.9 | 63.9 | -0.1 |")


def test_report_embeds_the_figure_and_names_every_run(tmp_path):
    results = [result("baseline", 1, 0.647), result("augment", 1, 0.629, {"augment_rate": 0.15}),
               result("baseline", 2, 0.641)]
    asr_levers.plot(results, ["dev"], tmp_path / "levers.png")
    assert (tmp_path / "levers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = asr_levers.report(results, ["dev"], argparse.Namespace(out=tmp_path), figure="levers.png")
    assert "![F1 per run and seed](levers.png)" in text
    assert "- `augment`: ASR-style noise" in text and "- `jitter`" not in text


def test_report_only_gathers_every_finished_run_and_trains_nothing(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for entry in (result("jitter", 2, 0.639, {"window_jitter": 25}), result("baseline", 1, 0.647),
                  result("baseline", 2, 0.640), result("augment", 1, 0.629, {"augment_rate": 0.15})):
        (runs / f"{entry['run']}_seed{entry['seed']}.json").write_text(json.dumps(entry), encoding="utf-8")
    assert asr_levers.main(["--params", str(REPO / "params.yaml"), "--out", str(tmp_path), "--report-only"]) == 0
    gathered = json.loads((tmp_path / "levers.json").read_text(encoding="utf-8"))
    assert [(r["run"], r["seed"]) for r in gathered] == [("baseline", 1), ("baseline", 2), ("augment", 1),
                                                         ("jitter", 2)]
    assert (tmp_path / "levers.png").is_file()
    assert "| jitter | 2 | window_jitter=25 | 63.9 |" in (tmp_path / "levers.md").read_text(encoding="utf-8")


def test_a_test_split_scored_only_for_some_runs_is_a_dash_elsewhere(tmp_path):
    chosen = result("jitter", 1, 0.651, {"window_jitter": 25})
    chosen["scores"]["ref"] = scores(0.66)
    base = result("baseline", 1, 0.647)
    base["scores"]["ref"] = scores(0.654)
    results = [base, result("augment", 1, 0.629, {"augment_rate": 0.15}), chosen]
    rows = asr_levers.table(results, ["dev", "ref"]).splitlines()
    assert rows[3].endswith("| -1.8 | – | – | – | – | – | – |")
    assert rows[4].endswith("| 66.0 | 34.0 | 66.0 | 66.0 | 66.0 | +0.6 |")
    asr_levers.plot(results, ["dev", "ref"], tmp_path / "levers.png")
    assert (tmp_path / "levers.png").stat().st_size > 0


def test_a_finished_run_asked_for_a_test_split_is_scored_not_trained_again(tmp_path, monkeypatch):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "runs").mkdir()
    finished = {**result("baseline", 1, 0.647), "model_dir": str(model_dir)}
    (tmp_path / "runs" / "baseline_seed1.json").write_text(json.dumps(finished), encoding="utf-8")
    scored = []

    def score(params, path, work, args, splits):
        scored.append((Path(path), list(splits)))
        return {"ref": scores(0.654)}

    def train_and_score(*_):
        raise AssertionError("a finished run is never trained again")

    monkeypatch.setattr(asr_levers, "score", score)
    monkeypatch.setattr(asr_levers, "train_and_score", train_and_score)
    argv = ["--params", str(REPO / "params.yaml"), "--out", str(tmp_path), "--work", str(tmp_path / "work"),
            "--runs", "baseline", "--splits", "dev", "ref"]
    assert asr_levers.main(argv) == 0
    assert scored == [(model_dir, ["ref"])]
    kept = json.loads((tmp_path / "runs" / "baseline_seed1.json").read_text(encoding="utf-8"))
    assert set(kept["scores"]) == {"dev", "ref"}  # dev as it was, ref added
    assert asr_levers.main(argv) == 0 and len(scored) == 1  # asked again: nothing left to score


def test_a_lever_is_kept_only_when_it_raised_dev_on_every_seed():
    results = [result("baseline", 1, 0.647), result("baseline", 2, 0.647),
               result("jitter", 1, 0.652), result("jitter", 2, 0.645),          # +0.5, -0.2
               result("augment", 1, 0.650), result("augment", 2, 0.649),        # +0.3, +0.2
               result("all", 1, 0.655),                                         # one seed only
               result("combine_decode", 1, 0.646), result("combine_decode", 2, 0.645),  # -0.1, -0.2
               result("combine_stride25", 1, 0.660), result("combine_stride25", 2, 0.66)]
    said = "\n".join(asr_levers.verdicts(results))
    assert said.startswith("The baseline itself over 2 seeds: 64.7 / 64.7 (dev F1).")
    assert "- `jitter`: dev Δ F1 +0.5, -0.2 (seeds 1, 2; mean +0.15): not kept: did not raise F1 on every seed" in said
    assert "- `augment`: dev Δ F1 +0.3, +0.2 (seeds 1, 2; mean +0.25): **kept**" in said
    assert "- `all`: dev Δ F1 +0.8 (seed 1; mean +0.80): not kept yet: one seed" in said
    assert ("- `combine_decode`: dev Δ F1 -0.1, -0.2 (seeds 1, 2; mean -0.15): not kept: did not raise F1 on any "
            "seed") in said
    assert "- `combine_stride25`: dev Δ F1 +1.3, +1.3 (seeds 1, 2; mean +1.30): not kept: 2x the decoding work" in said


def test_the_test_splits_are_a_table_of_their_own_for_the_runs_scored_on_them():
    chosen = result("baseline", 1, 0.647)
    chosen["scores"]["ref"] = scores(0.654)
    results = [chosen, result("augment", 1, 0.629, {"augment_rate": 0.15})]
    tables = asr_levers.split_tables(results, ["dev", "ref"])
    assert [([r["run"] for r in rows], splits) for rows, splits in tables] == [(["baseline", "augment"], ["dev"]),
                                                                             (["baseline"], ["ref"])]
    assert asr_levers.split_tables(results, ["dev"]) == [(results, ["dev"])]


def test_a_budget_point_trains_one_phase_longer_and_is_never_kept():
    params = load_params(REPO / "params.yaml")
    base = asr_levers.run_configs(params, "baseline", {"seed": 1}, {})
    longer = asr_levers.run_configs(params, "steps2x", {"seed": 1}, {})
    assert longer["minilm"][1]["max_steps"] == 2 * base["minilm"][1]["max_steps"]
    assert longer["minilm_words"] == base["minilm_words"]  # a phase's own setting stays in that phase
    assert {key for key in longer["minilm"][1] if longer["minilm"][1][key] != base["minilm"][1][key]} == {"max_steps"}
    results = [result("baseline", 1, 0.647), result("baseline", 2, 0.647),
               result("steps2x", 1, 0.670, asr_levers.RUNS["steps2x"][1]),
               result("steps2x", 2, 0.668, asr_levers.RUNS["steps2x"][1])]
    verdict = next(line for line in asr_levers.verdicts(results) if line.startswith("- `steps2x`"))
    assert "+2.3, +2.1" in verdict and "not a lever: 2x the fine-tuning steps" in verdict  # raised on both seeds
    assert "| steps2x | 1 | minilm.max_steps=2000 | 67.0 |" in asr_levers.table(results, ["dev"])


def timed(run, seed, dev, walls, levers=None):
    """A run whose two phases took ``walls`` wall seconds (minilm, minilm_words)."""
    done = result(run, seed, dev, levers)
    for phase, wall in zip(("minilm", "minilm_words"), walls):
        done["phases"][phase]["timings"] = {"wall_seconds": wall}
    return done


def test_a_lever_that_trains_longer_is_kept_only_within_the_pipelines_allowance():
    untimed_pipeline_model = result("baseline", 1, 0.647)  # the pipeline's own model: no timings, not averaged
    results = [untimed_pipeline_model, timed("baseline", 2, 0.647, (740, 100)), timed("baseline", 3, 0.640, (760, 100)),
               timed("batch8", 2, 0.655, (880, 100)), timed("batch8", 3, 0.650, (900, 100)),      # +140 s
               timed("slow", 2, 0.660, (1200, 100)), timed("slow", 3, 0.660, (1100, 100)),        # +400 s
               timed("quick", 2, 0.650, (745, 100)), timed("quick", 3, 0.645, (750, 105))]        # within 30 s
    assert asr_levers.training_wall_s(untimed_pipeline_model) is None
    assert asr_levers.mean_wall_s(results, "baseline") == 850.0
    said = {line.split("`")[1]: line for line in asr_levers.verdicts(results) if line.startswith("- `")}
    assert said["batch8"].endswith("(seeds 2, 3; mean +0.90; training +140 s): **kept**")
    assert said["slow"].endswith("training +400 s): not kept: +400 s of training, over the pipeline's 300 s allowance")
    assert said["quick"].endswith("(seeds 2, 3; mean +0.40): **kept**")  # a difference under 30 s is not reported
    assert "the baseline's mean on the same machine, 14.2 min on the study's" in asr_levers.verdicts(results)[0]


def test_every_run_is_measured_against_the_study_baseline_whatever_params_holds_now():
    params = load_params(REPO / "params.yaml")
    base = asr_levers.run_configs(params, "baseline", {"seed": 1}, {})
    assert base["minilm"][1]["max_steps"] == asr_levers.STUDY_BASELINE["minilm"]["max_steps"] == 1000
    assert base["minilm"][0]["freeze_layers"] == 0 and base["minilm"][0]["dropout"] == 0.1
    assert base["minilm_words"][0]["freeze_layers"] == 4  # the tuning's encoder frozen whole, as it always was
    for steps in (1350, 2000):  # whatever the default fine-tuning has become, the baseline run is the same
        moved = copy.deepcopy(params)
        moved["profiles"][moved["profile"]]["experiments"]["minilm"]["train"].update(max_steps=steps, keep="last")
        moved["profiles"][moved["profile"]]["experiments"]["minilm"]["model"].update(freeze_layers=steps // 1000,
                                                                                     dropout=0.0)
        assert asr_levers.run_configs(moved, "steps2x", {"seed": 1}, {})["minilm"][1]["max_steps"] == 2000
        assert asr_levers.run_configs(moved, "baseline", {"seed": 1}, {}) == base
    longer = asr_levers.run_configs(params, "steps1350", {"seed": 1}, {})
    assert longer["minilm"][1]["max_steps"] == 1350 and longer["minilm_words"] == base["minilm_words"]


def test_the_pipelines_model_stands_for_the_run_whose_settings_trained_both_its_phases(tmp_path):
    params = load_params(REPO / "params.yaml")
    configs = asr_levers.run_configs(params, "steps1350", {"seed": 1}, {})
    started, tuned = tmp_path / "minilm", tmp_path / "minilm_words"
    started.mkdir(), tuned.mkdir()
    (started / "config.json").write_text(json.dumps({"model": configs["minilm"][0], "train": configs["minilm"][1],
                                                     "metrics": {"steps": 1350}}))
    (tuned / "config.json").write_text(json.dumps({"model": configs["minilm_words"][0],
                                                   "train": configs["minilm_words"][1], "metrics": {"steps": 400},
                                                   "initialised_from": {"path": str(started)}}))
    phases = asr_levers.pipeline_phases(tuned, configs)
    assert phases["minilm"]["metrics"] == {"steps": 1350} and phases["minilm_words"]["metrics"] == {"steps": 400}
    # the same tuning from another fine-tuning (the baseline's 1,000 steps) is not this run's model
    assert asr_levers.pipeline_phases(tuned, asr_levers.run_configs(params, "baseline", {"seed": 1}, {})) is None
    # the same train settings with another model setting (dropout off) is not this run's model either
    nodropout = asr_levers.run_configs(params, "nodropout1600", {"seed": 1}, {})
    nodropout["minilm"] = (nodropout["minilm"][0], configs["minilm"][1])
    assert nodropout["minilm_words"][1] == configs["minilm_words"][1]
    assert asr_levers.pipeline_phases(tuned, nodropout) is None
    (started / "config.json").unlink()
    assert asr_levers.pipeline_phases(tuned, configs) is None  # the model it started from is gone: unknown


def test_every_recorded_run_still_resolves_to_the_settings_it_trained_with():
    """A default kept from a lever moves params.yaml; each finished run in reports/asr_levers/runs must still mean
    what it meant, or a resumed or re-scored run would train other settings under its old name (as keep_last's
    dev evaluations would have, every 420 steps, once evals_to_steps became the default)."""
    params = load_params(REPO / "params.yaml")
    recorded = sorted((REPO / "reports" / "asr_levers" / "runs").glob("*.json"))
    assert len(recorded) >= 20
    for path in recorded:
        result = json.loads(path.read_text(encoding="utf-8"))
        run = result["run"]  # a run that trains nothing records the phases of the run whose model it scores
        trained_by = asr_levers.DECODE_ONLY.get(run) or asr_levers.FIRST_PHASE_OF.get(run, run)
        configs = asr_levers.run_configs(params, trained_by, {"seed": result["seed"]}, {})
        for phase, trained in result["phases"].items():
            # the trainer's reading of both: a setting it gained after the run was recorded takes its default, with
            # which the run trained
            assert (TrainConfig.from_mapping(configs[phase][1]) == TrainConfig.from_mapping(trained["train"])), \
                (path.name, phase)


def test_a_runs_model_settings_go_over_both_phases_models_and_its_train_settings_stay():
    params = load_params(REPO / "params.yaml")
    base = asr_levers.run_configs(params, "baseline", {"seed": 1}, {})
    off = asr_levers.run_configs(params, "nodropout", {"seed": 1}, {})
    longer = asr_levers.run_configs(params, "nodropout1600", {"seed": 1}, {})
    for phase in ("minilm", "minilm_words"):
        assert base[phase][0]["dropout"] == 0.1 and off[phase][0]["dropout"] == 0.0
        assert {key for key in base[phase][0] if base[phase][0][key] != off[phase][0][key]} == {"dropout"}
        assert off[phase][1] == base[phase][1]  # a model setting is not a train setting
        assert longer[phase][0] == off[phase][0]
    assert longer["minilm"][1]["max_steps"] == 1600 and longer["minilm_words"][1] == base["minilm_words"][1]
    # the call's --model-set goes over the run's own
    assert asr_levers.run_configs(params, "nodropout", {}, {"dropout": 0.2})["minilm"][0]["dropout"] == 0.2
    assert asr_levers.settings_text(asr_levers.RUNS["nodropout1600"][1]) == "model.dropout=0.0, minilm.max_steps=1600"


def test_a_lever_with_a_reference_is_measured_against_it_and_its_time_only_on_one_machine(monkeypatch):
    monkeypatch.setattr(asr_levers, "REFERENCE", {"faster": "longer"})
    study, other = "AMD EPYC, 2 cores, AVX-512", "AMD EPYC, 2 cores, no AVX-512"

    def on(machine, done):
        return {**done, "machine": machine}

    results = [timed("baseline", 1, 0.640, (700, 100)), timed("baseline", 2, 0.640, (700, 100)),
               timed("longer", 1, 0.650, (900, 100)), timed("longer", 2, 0.660, (900, 100)),
               on(other, timed("faster", 1, 0.655, (2700, 300))), on(other, timed("faster", 2, 0.665, (2700, 300))),
               on(study, timed("baseline", 3, 0.640, (700, 100))), on(study, timed("quicker", 3, 0.650, (710, 100)))]
    said = {line.split("`")[1]: line for line in asr_levers.verdicts(results) if line.startswith("- `")}
    # +0.5 on both seeds against `longer` (+1.5, +2.5 against the baseline); 3,000 s on a machine without a baseline
    assert said["faster"].startswith("- `faster`: dev Δ F1 against `longer` +0.5, +0.5 (seeds 1, 2; mean +0.50; "
                                     f"trained on {other}, where no baseline ran: its time not compared)")
    assert said["faster"].endswith("not kept yet: no baseline trained on its machine to compare its training time with")
    assert "training +200 s" in said["longer"] and said["longer"].endswith("**kept**")
    assert said["quicker"].endswith("(seed 3; mean +1.00): not kept yet: one seed")  # 10 s: against seed 3's own
    assert asr_levers.machine_of(results[0]) == asr_levers.UNRECORDED_MACHINE
    assert asr_levers.mean_wall_s(results, "baseline") == 800.0
    assert asr_levers.mean_wall_s(results, "baseline", asr_levers.UNRECORDED_MACHINE) == 800.0
    assert asr_levers.mean_wall_s(results, "baseline", other) is None


def test_a_run_with_a_reference_trained_elsewhere_is_timed_from_the_step_costs_of_one_machine(monkeypatch, tmp_path):
    monkeypatch.setattr(asr_levers, "REFERENCE", {"faster": "longer"})
    other, bench = "AMD EPYC, 2 cores, no AVX-512", "Intel Xeon, 2 cores, AVX-512"

    def reference(seed, dev):  # 10 steps: 800 s of training, 100 s of dev evaluations and checkpoints
        done = timed("longer", seed, dev, (900, 100))
        done["phases"]["minilm"]["timings"].update(train_seconds=800)
        return done

    def faster(seed, dev):  # 12 steps without dropout (its result says so), on a machine where no baseline ran
        done = {**timed("faster", seed, dev, (3000, 300), levers={"model": {"dropout": 0.0}}), "machine": other}
        done["phases"]["minilm"]["metrics"] = {"steps": 12}
        return done

    results = [timed("baseline", 1, 0.640, (700, 100)), timed("baseline", 2, 0.640, (700, 100)),
               reference(1, 0.650), reference(2, 0.660), faster(1, 0.655), faster(2, 0.665)]

    def line(dropout, train_s, machine=bench, **more):  # measured at params' default (model_set {}) that day
        return {"experiment": "minilm", "steps": 60, "train_s": train_s, "model_set": {}, "train_set": {},
                "model": {"hidden": 8, "dropout": dropout, "freeze_layers": 0}, "machine": machine, **more}

    legacy = line(0.0, 1.0)
    del legacy["model"]  # model_set {} alone: dropout on or off, depending on the day
    # a step without dropout 0.75x the reference's (the study's dropout 0.1) on the bench machine (the lines of
    # other settings, experiments or machines, and a line that does not say its model, not counted)
    costs = [line(0.1, 120.0), line(0.0, 90.0), line(0.1, 120.0), line(0.0, 90.0), legacy,
             line(0.0, 10.0, machine="elsewhere"), line(0.1, 500.0, experiment="blstm"),
             {**line(0.1, 999.0), "train_set": {"max_steps": 5}}]
    assert asr_levers.fine_tuning_model(results, "faster") == {"dropout": 0.0, "freeze_layers": 0}
    assert asr_levers.study_model(results, "longer") == asr_levers.STUDY_MODEL == {"dropout": 0.1,
                                                                                   "minilm": {"freeze_layers": 0}}
    assert asr_levers.step_cost_ratio(costs, {"dropout": 0.0}, {"dropout": 0.1}) == (0.75, bench)
    assert asr_levers.step_cost_ratio(costs, {"dropout": 0.5}, {"dropout": 0.1}) is None
    # +200 s (the reference's) + 800 x 1.2 x 0.75 + 100 x 1.2 - 900 = +200 - 60 = +140 s
    assert asr_levers.estimated_extra_s(results, "faster", "longer", 0.75) == 140.0

    def said(step_costs=()):
        return {line.split("`")[1]: line for line in asr_levers.verdicts(results, step_costs=step_costs)
                if line.startswith("- `")}["faster"]

    assert said(costs) == ("- `faster`: dev Δ F1 against `longer` +0.5, +0.5 (seeds 1, 2; mean +0.50; training "
                           "+140 s, estimated: `longer`'s, its fine-tuning at this run's steps and 0.75x its step "
                           f"cost, measured on {bench} (`step_costs.jsonl`)): **kept**")
    # at 1.25x a step it would be +200 + 1200 + 120 - 900 = +620 s: over the allowance
    slower = [line(0.1, 120.0), line(0.0, 150.0)]
    assert said(slower).endswith("not kept: +620 s of training, over the pipeline's 300 s allowance")
    # without step costs of one machine it stays uncompared
    assert said().endswith("not kept yet: no baseline trained on its machine to compare its training time with")
    # the file: a line that is not JSON is named
    path = tmp_path / asr_levers.STEP_COSTS_FILE
    assert asr_levers.read_step_costs(path) == []
    path.write_text(json.dumps(costs[0]) + "\n\nnot json\n", encoding="utf-8")
    try:
        asr_levers.read_step_costs(path)
    except SystemExit as error:
        assert f"{path}, line 3: not a JSON line" in str(error)
    else:
        raise AssertionError("a line that is not JSON was read")


def test_a_first_phase_run_scores_the_model_its_source_started_from_and_trains_nothing(tmp_path, monkeypatch):
    from training.warm_start import weights_sha256

    first, tuned = tmp_path / "work" / "minilm" / "model", tmp_path / "work" / "minilm_words" / "model"
    for model_dir in (first, tuned):
        model_dir.mkdir(parents=True)
        (model_dir / "model.pt").write_bytes(model_dir.parent.name.encode())
    (first / "config.json").write_text("{}", encoding="utf-8")
    started = {"initialised_from": {"path": str(first), "weights_sha256": weights_sha256(first)}}
    (tuned / "config.json").write_text(json.dumps(started), encoding="utf-8")
    (tmp_path / "runs").mkdir()
    source = {**timed("nodropout1600", 1, 0.665, (1500, 100), levers={"model": {"dropout": 0.0}}),
              "model_dir": str(tuned), "machine": "a machine"}
    (tmp_path / "runs" / "nodropout1600_seed1.json").write_text(json.dumps(source), encoding="utf-8")
    scored = []

    def score(params, path, work, args, splits):
        scored.append(Path(path))
        return {"dev": scores(0.663)}

    def train_model(*_, **__):
        raise AssertionError("a first-phase run trains nothing")

    monkeypatch.setattr(asr_levers, "score", score)
    monkeypatch.setattr("training.train_model", train_model)
    argv = ["--params", str(REPO / "params.yaml"), "--out", str(tmp_path), "--work", str(tmp_path / "work"),
            "--runs", "nodropout1600", "nodropout1600_first_phase"]
    assert asr_levers.main(argv) == 0
    assert scored == [first]
    done = json.loads((tmp_path / "runs" / "nodropout1600_first_phase_seed1.json").read_text(encoding="utf-8"))
    assert done["model_dir"] == str(first) and done["phases"] == source["phases"]
    assert done["levers"] == source["levers"]  # what its model was trained with: its source's settings
    said = [line for line in (tmp_path / "levers.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("- `nodropout1600_first_phase`: dev")]
    # measured against its source, seed by seed; its time is the source's, not an extra
    assert said == ["- `nodropout1600_first_phase`: dev Δ F1 against `nodropout1600` -0.2 (seed 1; mean -0.20; no "
                    "training of its own: `nodropout1600`'s first phase): not kept: did not raise F1"]

    (first / "model.pt").write_bytes(b"trained again")  # the source's first phase is not what its tuning started from
    (tmp_path / "runs" / "nodropout1600_first_phase_seed1.json").unlink()
    with pytest.raises(SystemExit, match="no longer holds the weights"):
        asr_levers.main(argv)
    (tmp_path / "runs" / "nodropout1600_seed1.json").unlink()
    with pytest.raises(SystemExit, match=r"nodropout1600_seed1\.json does not exist: run --runs nodropout1600"):
        asr_levers.main(argv[:-2] + ["nodropout1600_first_phase"])


def test_a_run_kept_another_way_is_timed_from_its_reference_beside_it(monkeypatch):
    monkeypatch.setattr(asr_levers, "REFERENCE", {"longer": "baseline", "kept_other_way": "longer"})
    other = "AMD EPYC, 2 cores, no AVX-512"
    results = [timed("baseline", 1, 0.640, (700, 100)), timed("baseline", 2, 0.640, (700, 100)),
               timed("longer", 1, 0.650, (900, 100)), timed("longer", 2, 0.660, (900, 100)),
               {**timed("longer", 3, 0.660, (2700, 300)), "machine": other},
               {**timed("kept_other_way", 3, 0.662, (2700, 285)), "machine": other}]
    # `longer`: +200 s against the baseline on the study's machine; its run of seed 3 beside the new one: -15 s
    assert asr_levers.extra_training(results, "kept_other_way") == (185.0, False, None, -15.0)
    said = {line.split("`")[1]: line for line in asr_levers.verdicts(results) if line.startswith("- `")}
    assert said["kept_other_way"] == ("- `kept_other_way`: dev Δ F1 against `longer` +0.2 (seed 3; mean +0.20; "
                                      f"training +185 s: `longer`'s +200 s and -15 s measured beside it on {other}): "
                                      "not kept yet: one seed")
    # a reference whose own extra is unknown (trained only where no baseline ran) leaves the run uncompared
    elsewhere = [r for r in results if r["run"] != "longer" or r.get("machine") == other]
    assert asr_levers.extra_training(elsewhere, "kept_other_way") == (None, True, None, None)


def write_history(model_dir, evaluated_steps, steps):
    """The ``history.csv`` a trainer leaves in ``model_dir``: a row every step of ``steps``, a dev evaluation at each
    of ``evaluated_steps``."""
    from training.model_output import HISTORY_COLUMNS, HISTORY_FILE

    Path(model_dir).mkdir(parents=True, exist_ok=True)
    rows = [",".join(map(str, (step, 0, 0.1, *((0.2, 0.6) if step in evaluated_steps else ("", "")), 1e-4)))
            for step in range(1, steps + 1)]
    (Path(model_dir) / HISTORY_FILE).write_text("\n".join([",".join(HISTORY_COLUMNS), *rows]) + "\n",
                                                encoding="utf-8")


def phased(run, seed, dev, phases, machine):
    """A run whose phases each did ``(steps, dev_evaluations, train_s, eval_s, checkpoint_s, wall_s)``."""
    done = {**result(run, seed, dev), "machine": machine}
    for name, (steps, evaluations, train, evals, checkpoints, wall) in phases.items():
        done["phases"][name] = {"metrics": {"steps": steps},
                                "timings": {"train_seconds": train, "eval_seconds": evals,
                                            "dev_evaluations": evaluations, "checkpoint_seconds": checkpoints,
                                            "wall_seconds": wall}}
    return done


def test_a_run_doing_its_references_work_in_other_amounts_is_timed_at_its_own_rates(monkeypatch):
    monkeypatch.setattr(asr_levers, "REFERENCE", {"longer": "baseline", "fewer_evals": "longer"})
    other = "AMD EPYC, 2 cores, no AVX-512"
    head = (400, 4, 300.0, 40.0, 2.0, 350.0)
    reference = phased("longer", 3, 0.660, {"minilm": (1600, 16, 3000.0, 160.0, 16.0, 3200.0), "minilm_words": head},
                       other)
    # on a day that machine ran 1.25x slower: 80 more steps, 4 evaluations instead of 16, everything 1.25x the cost
    slower = phased("fewer_evals", 3, 0.662, {"minilm": (1680, 4, 3936.0, 50.0, 5.0, 4021.0),
                                              "minilm_words": (400, 4, 375.0, 50.0, 2.5, 437.5)}, other)
    results = [timed("baseline", 1, 0.640, (700, 100)), timed("baseline", 2, 0.640, (700, 100)),
               timed("longer", 1, 0.650, (900, 100)), timed("longer", 2, 0.660, (900, 100)), reference, slower]
    # its first phase at the reference's 1,600 steps and 16 evaluations, at its own rates: 3936 / 1680 x 1600 +
    # 55 / 4 x 16 + the 30 s of the rest; its second phase did the reference's work: nothing beyond it
    beyond = 4021.0 - (3936.0 / 1680 * 1600 + 55.0 / 4 * 16 + 30.0)
    assert asr_levers.work_beyond_s(results, "fewer_evals", "longer") == pytest.approx(beyond)
    assert asr_levers.extra_training(results, "fewer_evals") == pytest.approx((200.0 + beyond, False, None, beyond))
    said = {line.split("`")[1]: line for line in asr_levers.verdicts(results) if line.startswith("- `")}
    assert said["fewer_evals"].endswith(f"training +222 s: `longer`'s +200 s and +22 s for its work beyond "
                                        f"`longer`'s at its own rates on {other}): not kept yet: one seed")
    # the wall times alone would have said +908.5 s; with other model settings only they are compared
    other_model = {**slower, "levers": {"model": {"dropout": 0.0}}}
    assert asr_levers.work_beyond_s([*results[:-1], other_model], "fewer_evals", "longer") is None
    assert asr_levers.extra_training([*results[:-1], other_model], "fewer_evals")[3] == pytest.approx(908.5)


def test_keep_last_resumes_its_source_s_finished_first_phase_and_trains_only_the_second(tmp_path, monkeypatch):
    params = load_params(REPO / "params.yaml")
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "manifest.json").write_text("{}", encoding="utf-8")  # what the fingerprint hashes
    args = argparse.Namespace(work=tmp_path / "work", train_set=[], model_set=[], features=tmp_path / "features")
    with pytest.raises(SystemExit, match=r"nodropout1600_seed1/minilm/state/checkpoint\.pt does not exist: run "
                                         r"--runs nodropout1600 --seeds 1 first"):
        asr_levers.resume_first_phase(params, "keep_last", 1, args)
    state = tmp_path / "work" / "nodropout1600_seed1" / "minilm" / "state"
    state.mkdir(parents=True)
    (state / "checkpoint.pt").write_bytes(b"finished")
    (state / "trainer.lock").write_bytes(b"")
    asr_levers.resume_first_phase(params, "keep_last", 1, args)
    copied = tmp_path / "work" / "keep_last_seed1" / "minilm" / "state"
    assert (copied / "checkpoint.pt").read_bytes() == b"finished" and not (copied / "trainer.lock").exists()
    # the settings differ only in which weights are kept: the same fingerprint, so the trainer resumes it
    from training.config import TrainConfig

    ours, theirs = (asr_levers.run_configs(params, run, {"seed": 1}, {})["minilm"] for run in
                    ("keep_last", "nodropout1600"))
    assert ours[1]["keep"] == "last" and "keep" not in TrainConfig.from_mapping(theirs[1]).as_params()
    assert TrainConfig.from_mapping(ours[1]).fingerprinted() == TrainConfig.from_mapping(theirs[1]).fingerprinted()
    assert asr_levers.run_configs(params, "keep_last", {"seed": 1}, {})["minilm_words"][1]["keep"] == "last"
    # a run that differs in more than that cannot resume it
    monkeypatch.setitem(asr_levers.RESUMES, "steps2x", "nodropout1600")
    with pytest.raises(SystemExit, match="differs from nodropout1600's in more than keep"):
        asr_levers.resume_first_phase(params, "steps2x", 1, args)


def test_a_resumed_run_s_first_phase_is_timed_as_its_source_s_training(tmp_path, monkeypatch):
    from types import SimpleNamespace

    state = tmp_path / "work" / "nodropout1600_seed1" / "minilm" / "state"
    state.mkdir(parents=True)
    (state / "checkpoint.pt").write_bytes(b"finished")
    (tmp_path / "runs").mkdir()
    source = {**timed("nodropout1600", 1, 0.665, (3310, 387), levers={"model": {"dropout": 0.0}}),
              "machine": asr_levers.this_machine()}
    (tmp_path / "runs" / "nodropout1600_seed1.json").write_text(json.dumps(source), encoding="utf-8")
    trained = []

    def train_model(features, out_dir, state_dir, *, model_config, train_config, **_):
        phase = Path(state_dir).parent.name
        trained.append((phase, train_config["keep"], (Path(state_dir) / "checkpoint.pt").exists()))
        wall = 6.0 if phase == "minilm" else 360.0  # keeping the finished phase: seconds
        write_history(out_dir, {5, 10}, 10)
        return SimpleNamespace(metrics={"completed": True, "steps": 10}, timings={"wall_seconds": wall})

    monkeypatch.setattr("training.train_model", train_model)
    monkeypatch.setattr(asr_levers, "score", lambda *_: {"dev": scores(0.667)})
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "manifest.json").write_text("{}", encoding="utf-8")  # what the fingerprint hashes
    argv = ["--params", str(REPO / "params.yaml"), "--out", str(tmp_path), "--work", str(tmp_path / "work"),
            "--features", str(tmp_path / "features"), "--runs", "keep_last"]
    source_file = tmp_path / "runs" / "nodropout1600_seed1.json"
    source_file.rename(tmp_path / "aside.json")  # without its source's result, the run stops before any training
    with pytest.raises(SystemExit, match=r"nodropout1600_seed1\.json does not exist: run --runs nodropout1600"):
        asr_levers.main(argv)
    assert trained == []
    (tmp_path / "aside.json").rename(source_file)
    assert asr_levers.main(argv) == 0
    assert trained == [("minilm", "last", True), ("minilm_words", "last", False)]  # the first phase resumed
    done = json.loads((tmp_path / "runs" / "keep_last_seed1.json").read_text(encoding="utf-8"))
    assert done["phases"]["minilm"]["timings"] == {"wall_seconds": 3310}
    assert done["phases"]["minilm_words"]["timings"] == {"wall_seconds": 360.0, "dev_evaluations": 2}
    assert done["phases"]["minilm"]["resumed_from"] == "nodropout1600"
    assert asr_levers.training_wall_s(done) == 3310 + 360  # 27 s less than its source beside it


def test_a_run_paused_by_its_time_reports_nothing_and_the_same_command_resumes_it(tmp_path, monkeypatch):
    from types import SimpleNamespace

    calls = []

    def train_model(features, out_dir, state_dir, *, budget, **_):
        phase = Path(state_dir).parent.name
        calls.append((phase, budget.pause_at is not None))
        done = budget.pause_at is None or len(calls) > 1  # the first call pauses, as a budget that ran out would
        if done:  # the model directory, with the evaluations made (at steps 4, 7 and the end)
            write_history(out_dir, {4, 7, 10}, 10)
        return SimpleNamespace(metrics={"completed": done, "steps": 840 if not done else 10},
                               timings={"wall_seconds": 1.0})

    monkeypatch.setattr("training.train_model", train_model)
    monkeypatch.setattr(asr_levers, "score", lambda *_: {"dev": scores(0.667)})
    argv = ["--params", str(REPO / "params.yaml"), "--out", str(tmp_path), "--work", str(tmp_path / "work"),
            "--runs", "evals_to_steps"]
    assert asr_levers.main([*argv, "--pause-after-s", "3000"]) == 3
    assert calls == [("minilm", True)]
    assert not (tmp_path / "runs" / "evals_to_steps_seed1.json").exists() and not (tmp_path / "levers.md").exists()
    assert asr_levers.main(argv) == 0  # resumed: every phase to its end, then the result and the report
    assert calls[1:] == [("minilm", False), ("minilm_words", False)]
    assert (tmp_path / "runs" / "evals_to_steps_seed1.json").is_file() and (tmp_path / "levers.md").is_file()
    done = json.loads((tmp_path / "runs" / "evals_to_steps_seed1.json").read_text(encoding="utf-8"))
    assert [phase["timings"]["dev_evaluations"] for phase in done["phases"].values()] == [3, 3]  # as recorded


def test_evals_to_steps_is_keep_last_with_its_first_phase_evaluations_spent_on_steps():
    params = load_params(REPO / "params.yaml")
    ours, theirs = (asr_levers.run_configs(params, run, {"seed": 1}, {}) for run in ("evals_to_steps", "keep_last"))
    assert ours["minilm_words"] == theirs["minilm_words"] and ours["minilm"][0] == theirs["minilm"][0]
    changed = {key: (theirs["minilm"][1][key], value) for key, value in ours["minilm"][1].items()
               if value != theirs["minilm"][1][key]}
    assert changed == {"max_steps": (1600, 1680), "eval_every_steps": (100, 420)}
    assert asr_levers.REFERENCE["evals_to_steps"] == "keep_last"


def test_freeze_whole_schedule_is_freeze_first_layer_run_to_the_end_of_its_two_epochs():
    params = load_params(REPO / "params.yaml")
    ours, theirs = (asr_levers.run_configs(params, run, {"seed": 1}, {})
                    for run in ("freeze_whole_schedule", "freeze_first_layer"))
    assert ours["minilm_words"] == theirs["minilm_words"] and ours["minilm"][0] == theirs["minilm"][0]
    assert ours["minilm"][0]["freeze_layers"] == 1
    changed = {key: (theirs["minilm"][1][key], value) for key, value in ours["minilm"][1].items()
               if value != theirs["minilm"][1][key]}
    assert changed == {"max_steps": (2160, 2626)}
    assert ours["minilm"][1]["epochs"] == 2  # 2,626 steps are the two epochs' end (steps3x's run ended there)
    assert asr_levers.REFERENCE["freeze_whole_schedule"] == "freeze_first_layer"


def test_a_model_setting_keyed_by_a_phase_goes_over_that_phase_only():
    params = load_params(REPO / "params.yaml")
    reference = asr_levers.run_configs(params, "evals_to_steps", {}, {})
    frozen = asr_levers.run_configs(params, "freeze_first_layer", {}, {})
    # the fine-tuning freezes the embeddings and its first layer; the tuning keeps its whole encoder frozen
    assert frozen["minilm"][0]["freeze_layers"] == 1 and reference["minilm"][0]["freeze_layers"] == 0
    assert frozen["minilm_words"][0] == reference["minilm_words"][0]
    assert frozen["minilm_words"][0]["freeze_layers"] == \
        params["tunings"][asr_levers.TUNING_SETTINGS_OF]["model"]["freeze_layers"]
    assert {key for key in frozen["minilm"][0] if frozen["minilm"][0][key] != reference["minilm"][0][key]} == {
        "freeze_layers"}
    assert (frozen["minilm"][1]["max_steps"], frozen["minilm"][1]["eval_every_steps"]) == (2160, 540)
    assert asr_levers.phase_settings({"dropout": 0.0, "minilm": {"freeze_layers": 1}}, "minilm_words") == {
        "dropout": 0.0}
    assert asr_levers.settings_text(asr_levers.RUNS["freeze_first_layer"][1]) == (
        "keep=last, model.dropout=0.0, model.minilm.freeze_layers=1, minilm.max_steps=2160, "
        "minilm.eval_every_steps=540")


def test_a_setting_only_one_side_has_tells_the_step_costs_of_run_and_reference_apart():
    def line(train_s, **model):
        return {"experiment": "minilm", "steps": 10, "train_s": train_s, "train_set": {}, "machine": "m",
                "model": {"dropout": 0.0, "freeze_layers": 0, **model}}

    costs = [line(9.0), line(6.0, freeze_layers=1), line(11.0), line(5.0, freeze_layers=1)]
    # without the rule the reference ({dropout: 0.0}) would average all four lines
    assert asr_levers.step_cost_ratio(costs, {"dropout": 0.0, "freeze_layers": 1}, {"dropout": 0.0}) == (0.55, "m")
    assert asr_levers.step_cost_ratio(costs, {"dropout": 0.0}, {"dropout": 0.0, "freeze_layers": 1}) == (
        pytest.approx(1 / 0.55), "m")


def test_a_reference_without_a_baseline_on_its_machine_lends_its_own_estimated_extra(monkeypatch):
    # chain: `near` beside the baseline (+100 s), `far` beside `near` on another machine (where no baseline ran),
    # `cheap` on a third machine, timed from `far` and the step costs
    monkeypatch.setattr(asr_levers, "REFERENCE", {"far": "near", "cheap": "far"})
    monkeypatch.setattr(asr_levers, "work_beyond_s", lambda *args: None)
    two = "machine two"

    def on(machine, done, steps=10, train=None):
        done["machine"] = machine
        done["phases"]["minilm"]["metrics"] = {"steps": steps}
        if train is not None:
            done["phases"]["minilm"]["timings"]["train_seconds"] = train
        return done

    results = [on("one", timed("baseline", 1, 0.640, (700, 100))), on("one", timed("near", 1, 0.650, (800, 100))),
               on(two, timed("near", 2, 0.650, (1600, 200))),
               on(two, timed("far", 1, 0.655, (1700, 200), levers={"model": {"dropout": 0.0}}), train=1500),
               on("three", timed("cheap", 1, 0.660, (900, 100),
                                 levers={"model": {"dropout": 0.0, "minilm": {"freeze_layers": 1}}}), steps=20)]
    assert asr_levers.fine_tuning_model(results, "cheap") == {"dropout": 0.0, "freeze_layers": 1}
    far_extra = asr_levers.extra_training(results, "far")[0]
    assert far_extra == 100.0 + (1900 - 1800)  # its reference's extra and its own time beside it
    # `far`'s fine-tuning again at twice the steps, half the cost a step: 1500 x 2 x 0.5 + 200 x 2 - 1700 = +200 s
    assert asr_levers.estimated_extra_s(results, "cheap", "far", 0.5) == far_extra + 200.0


def test_the_levers_again_on_the_default_change_only_their_lever():
    """jitter_default and augment_default are freeze_whole_schedule (today's default) with one train setting more, in
    both phases; freeze_two_layers freezes a second layer and runs into a third epoch; combine_decode_default trains
    nothing and decodes freeze_whole_schedule's model its way."""
    params = load_params(REPO / "params.yaml")
    reference = asr_levers.run_configs(params, "freeze_whole_schedule", {"seed": 2}, {})
    for run, lever in (("jitter_default", {"window_jitter": 25}), ("augment_default", {"augment_rate": 0.15})):
        ours = asr_levers.run_configs(params, run, {"seed": 2}, {})
        assert asr_levers.REFERENCE[run] == "freeze_whole_schedule"
        for phase in ("minilm", "minilm_words"):
            assert ours[phase][0] == reference[phase][0]
            assert {key: value for key, value in ours[phase][1].items() if value != reference[phase][1][key]} == lever
    two = asr_levers.run_configs(params, "freeze_two_layers", {"seed": 2}, {})
    assert {key: value for key, value in two["minilm"][0].items() if value != reference["minilm"][0][key]} == {
        "freeze_layers": 2}
    assert {key: value for key, value in two["minilm"][1].items() if value != reference["minilm"][1][key]} == {
        "max_steps": 3300, "epochs": 3, "eval_every_steps": 660}
    assert two["minilm_words"] == reference["minilm_words"]
    assert asr_levers.DECODE_ONLY["combine_decode_default"] == asr_levers.REFERENCE["combine_decode_default"] == (
        "freeze_whole_schedule")


def test_a_decode_only_run_sets_nothing_but_decoding():
    """A run of DECODE_ONLY trains nothing: a train or model setting among its levers would be recorded as measured
    while its source's model, trained without it, is what gets scored."""
    for run, source in asr_levers.DECODE_ONLY.items():
        assert source in asr_levers.RUNS and source not in asr_levers.DECODE_ONLY
        assert asr_levers.RUNS[run][1] and all(key.startswith("decode_") for key in asr_levers.RUNS[run][1]), run


def test_a_decode_only_run_scores_its_source_runs_model_under_its_own_decoding(tmp_path, monkeypatch):
    """The decoded copy links the source's files and records the run's decoding; the result carries the source's
    settings, phases and machine, so the levers' rule times it as the source."""
    source_dir = tmp_path / "source" / "model"
    source_dir.mkdir(parents=True)
    (source_dir / "model.pt").write_bytes(b"weights")
    (source_dir / "config.json").write_text(json.dumps({"train": {"decode_combine": "centre"}, "stride": 50}))
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    source = {"run": "freeze_whole_schedule", "seed": 1, "levers": asr_levers.RUNS["freeze_whole_schedule"][1],
              "model_dir": str(source_dir), "phases": {"minilm": {"timings": {"wall_seconds": 10.0}}},
              "machine": "m", "scores": {}}
    (out / "runs" / "freeze_whole_schedule_seed1.json").write_text(json.dumps(source))
    monkeypatch.setattr(asr_levers, "score", lambda params, model_dir, work, args, splits: {"dev": str(model_dir)})
    args = argparse.Namespace(out=out, work=tmp_path / "work", splits=["dev"])
    result = asr_levers.train_and_score({}, "combine_decode_default", 1, args)
    decoded = Path(result["model_dir"])
    assert (decoded / "model.pt").read_bytes() == b"weights" and (decoded / "model.pt").is_symlink()
    assert json.loads((decoded / "config.json").read_text())["train"]["decode_combine"] == "sum"
    assert json.loads((source_dir / "config.json").read_text())["train"]["decode_combine"] == "centre"
    assert json.loads((decoded / "config.json").read_text())["stride"] == 50  # the run leaves the windows alone
    assert result["levers"] == {**source["levers"], "decode_combine": "sum"}
    assert result["phases"] == source["phases"] and result["machine"] == "m"
    assert asr_levers.study_model([result], "combine_decode_default") == asr_levers.study_model(
        [source], "freeze_whole_schedule")


def test_a_decode_only_run_of_other_windows_records_them_as_the_trainer_does(tmp_path, monkeypatch):
    """wide_decode_default decodes fresh_data_allowance's model with windows of 150 every 75: the copy's recorded
    ``window`` and ``stride`` (what score_dev and punctuate read) are the run's, the source's untouched."""
    source_dir = tmp_path / "source" / "model"
    source_dir.mkdir(parents=True)
    (source_dir / "config.json").write_text(json.dumps({"train": {"decode_combine": "centre"}, "window": 100,
                                                        "stride": 50}))
    decoded = asr_levers.decoded_again(source_dir, "wide_decode_default", tmp_path / "work")
    config = json.loads((decoded / "config.json").read_text())
    assert (config["window"], config["stride"]) == (150, 75)
    assert (config["train"]["decode_window"], config["train"]["decode_stride"]) == (150, 75)
    assert json.loads((source_dir / "config.json").read_text())["window"] == 100
    assert asr_levers.DECODE_ONLY["wide_decode_default"] == asr_levers.REFERENCE["wide_decode_default"] == (
        "fresh_data_allowance")


def test_fresh_data_is_freeze_whole_schedule_over_one_epoch_of_a_draw_twice_as_long():
    """fresh_data trains freeze_whole_schedule's steps in one epoch of a 4.2M-token draw: its only own setting is the
    fine-tuning's epochs, and the draw is twice the default's training tokens."""
    params = load_params(REPO / "params.yaml")
    reference = asr_levers.run_configs(params, "freeze_whole_schedule", {"seed": 1}, {})
    ours = asr_levers.run_configs(params, "fresh_data", {"seed": 1}, {})
    assert asr_levers.REFERENCE["fresh_data"] == "freeze_whole_schedule"
    assert ours["minilm"][0] == reference["minilm"][0] and ours["minilm_words"] == reference["minilm_words"]
    assert {key: value for key, value in ours["minilm"][1].items() if value != reference["minilm"][1][key]} == {
        "epochs": 1}
    assert asr_levers.TRAIN_TOKENS["fresh_data"] == 2 * params["data"]["train_tokens"]
    longer = asr_levers.run_configs(params, "fresh_data_allowance", {"seed": 1}, {})
    assert asr_levers.REFERENCE["fresh_data_allowance"] == "fresh_data"
    assert longer["minilm"][0] == ours["minilm"][0] and longer["minilm_words"] == ours["minilm_words"]
    assert {key: value for key, value in longer["minilm"][1].items() if value != ours["minilm"][1][key]} == {
        "max_steps": 2925}
    # one epoch of the longer draw holds every step: no text is read twice
    assert 2925 * ours["minilm"][1]["batch_size"] * ours["minilm"][1]["seq_len"] <= (
        asr_levers.TRAIN_TOKENS["fresh_data_allowance"])


def test_the_pipelines_minilm_trains_as_the_kept_run_steps_for_words_arm():
    """params.yaml's MiniLM is steps_for_words_arm's fine-tuning (model and train settings), read from the draw stage's
    draw of that run's length, and the pipeline trains no tuning on words: its text model is that run's seed 1."""
    params = load_params(REPO / "params.yaml")
    seed = experiment_config(params, "minilm")[1]["seed"]
    run = asr_levers.run_configs(params, "steps_for_words_arm", {"seed": seed}, {})
    assert run["minilm"] == experiment_config(params, "minilm")
    assert params["experiments"]["minilm"]["features"] == "data/draws/long/features"
    assert params["draws"]["long"] == asr_levers.TRAIN_TOKENS["steps_for_words_arm"]
    assert "steps_for_words_arm" in asr_levers.FIRST_PHASE_ONLY and "minilm_words" not in params["tunings"]
    # the study's second phase, for the runs that have one, is the MiniLM tunings' shared settings
    tuned_model, tuned_train = tuning_config(params, asr_levers.TUNING_SETTINGS_OF)[1:]
    older = asr_levers.run_configs(params, "fresh_data_allowance", {"seed": seed}, {})
    # the study pins the tuning's two epochs of its day (params' now inherit the fine-tuning's); its 400 steps end
    # within one epoch of the training set, so the epochs change no step and no rate (the linear decay ends at
    # max_steps either way)
    assert older["minilm_words"][0] == tuned_model
    assert {**older["minilm_words"][1], "epochs": tuned_train["epochs"]} == tuned_train
    assert tuned_train["max_steps"] * tuned_train["batch_size"] * tuned_train["seq_len"] < (
        params["data"]["train_tokens"])


def test_punctuates_text_model_is_the_first_phase_the_kept_first_phase_default_scores():
    """first_phase_default (kept) scores fresh_data_allowance's first phase without training anything: params'
    text model is that phase, the experiment's own model directory, not its tuning on words."""
    params = load_params(REPO / "params.yaml")
    assert asr_levers.FIRST_PHASE_OF["first_phase_default"] == asr_levers.REFERENCE["first_phase_default"] == \
        "fresh_data_allowance"
    assert asr_levers.RUNS["first_phase_default"][1] == {}  # no setting of its own: the source run's model
    assert params["punctuate"]["text_model"] == "artifacts/minilm/model"


def test_a_runs_longer_draw_is_built_under_the_work_folder_by_the_draw_stages_function(tmp_path, monkeypatch):
    import trainset.draws

    calls = []
    monkeypatch.setattr(trainset.draws, "draw_features",
                        lambda data, embed, tokens, out: calls.append((data, embed, tokens, out)) or out / "features")
    params = {"data": {"seed": 1}, "embed": {"oov": "random"}}
    assert asr_levers.drawn_features(params, 4_200_000, tmp_path) == tmp_path / "data_4200000" / "features"
    assert calls == [({"seed": 1}, {"oov": "random"}, 4_200_000, tmp_path / "data_4200000")]


def test_a_run_without_the_words_arm_trains_and_scores_the_fine_tuning_alone(tmp_path, monkeypatch):
    from types import SimpleNamespace

    trained, scored = [], []

    def train_model(features, out_dir, state_dir, *, train_config, **_):
        trained.append((Path(state_dir).parent.name, train_config["max_steps"], Path(features)))
        write_history(out_dir, {540, 3150}, 3150)
        return SimpleNamespace(metrics={"completed": True, "steps": 3150}, timings={"wall_seconds": 1900.0})

    monkeypatch.setattr("training.train_model", train_model)
    monkeypatch.setattr(asr_levers, "drawn_features", lambda params, tokens, work: work / f"data_{tokens}")
    monkeypatch.setattr(asr_levers, "score", lambda params, path, *_: scored.append(Path(path)) or
                        {"dev": scores(0.687)})
    argv = ["--params", str(REPO / "params.yaml"), "--out", str(tmp_path), "--work", str(tmp_path / "work"),
            "--runs", "steps_for_words_arm"]
    assert asr_levers.main(argv) == 0
    work = tmp_path / "work"
    assert trained == [("minilm", 3150, work / "data_5100000")]  # the head's tuning is not trained
    assert scored == [work / "steps_for_words_arm_seed1" / "minilm" / "model"]  # the fine-tuned model is scored
    done = json.loads((tmp_path / "runs" / "steps_for_words_arm_seed1.json").read_text(encoding="utf-8"))
    assert list(done["phases"]) == ["minilm"] and asr_levers.training_wall_s(done) == 1900.0
    assert "`minilm` (3150 steps) then `minilm_words` (not trained by steps_for_words_arm)" in \
        (tmp_path / "levers.md").read_text(encoding="utf-8")


def test_a_phase_the_run_drops_saves_its_references_time_for_it(monkeypatch):
    monkeypatch.setattr(asr_levers, "REFERENCE", {"longer": "baseline", "fine_tuning_only": "longer"})
    machine = "AMD EPYC, 2 cores, AVX-512"
    reference = phased("longer", 3, 0.660, {"minilm": (2925, 6, 1600.0, 60.0, 6.0, 1686.0),
                                            "minilm_words": (400, 4, 120.0, 16.0, 2.0, 140.0)}, machine)
    run = phased("fine_tuning_only", 3, 0.662, {"minilm": (3150, 7, 1723.0, 70.0, 7.0, 1820.0)}, machine)
    del run["phases"]["minilm_words"]  # not trained (FIRST_PHASE_ONLY)
    results = [timed("baseline", 1, 0.640, (700, 100)), timed("baseline", 2, 0.640, (700, 100)),
               timed("longer", 1, 0.650, (1000, 100)), reference, run]
    # its fine-tuning at the reference's 2,925 steps and 6 evaluations, at its own rates, less the reference's tuning
    own = 1820.0 - (1723.0 / 3150 * 2925 + 77.0 / 7 * 6 + 20.0)
    assert asr_levers.work_beyond_s(results, "fine_tuning_only", "longer") == pytest.approx(own - 140.0)
    assert asr_levers.extra_training(results, "fine_tuning_only")[0] == pytest.approx(300.0 + own - 140.0)


def test_a_first_phase_runs_time_is_its_sources_training():
    results = [timed("baseline", 1, 0.640, (700, 100)), timed("nodropout1600", 1, 0.665, (900, 100)),
               {**timed("nodropout1600_first_phase", 1, 0.663, (900, 100))}]
    assert asr_levers.extra_training(results, "nodropout1600_first_phase") == \
        asr_levers.extra_training(results, "nodropout1600") == (200.0, False, None, None)
