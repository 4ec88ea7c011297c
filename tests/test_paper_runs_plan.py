"""The GPU lease's plan and the rates that accumulate over leases (paper_runs/plan.py, paper_runs/rates.py):
the training deadline derived from the lease, graph-mode rates derived from kernels and arithmetic, runs sharing a
time-sliced GPU, which runs a lease starts, the best known rates, and the thirteenth run's reading in the report."""

from __future__ import annotations

import json

import pytest

from experiments.numerics import numeric_facts
from experiments.params import load_params
from paper_runs import plan as gpu_plan, rates as gpu_rates
from paper_runs.records import PAPER_RUNS, READINGS, paper_record, readings_markdown, run_config
from tests.helpers import REPO


@pytest.fixture(scope="module")
def params():
    return load_params(REPO / "params.yaml", profile="paper")


def test_the_training_deadline_is_derived_from_the_lease_and_the_one_command(params):
    kit = params["gpu_kit"]
    budget = gpu_plan.lease_budget(kit)
    allowance = kit["allowance_s"]
    assert budget["lease_s"] == kit["lease_s"] == 900 and budget["command_s"] <= 570  # one command of <= 9.5 min
    assert budget["by_lease"] == 900 - sum(allowance.values())
    assert budget["by_command"] == kit["command_s"] - allowance["unpack"] - allowance["scoring"] - allowance["collect"]
    assert budget["train_s"] == min(budget["by_lease"], budget["by_command"])
    assert gpu_plan.lease_budget(kit, 600)["train_s"] == min(600 - sum(allowance.values()), budget["by_command"])
    assert "train_budget_s" not in kit  # no second, hand-set figure that could disagree


def test_a_second_command_of_the_lease_has_what_the_first_leaves_less_scoring_collect_and_margin(params):
    kit = params["gpu_kit"]
    allowance, budget = kit["allowance_s"], gpu_plan.lease_budget(kit)
    assert allowance["machine_start"] < 180  # measured: 31.5 s in lease 20261204T1644Z, not "minutes"
    later = budget["later"]
    # the first command at its full length after the machine's start; what is left, less the give-back/idle margin
    assert later["left_s"] == 900 - allowance["machine_start"] - kit["command_s"]
    assert later["command_s"] == later["left_s"] - allowance["margin"]
    # its training from its start: no machine start, no unpacking (the kit is there), scoring and collect still
    assert later["train_s"] == later["command_s"] - allowance["scoring"] - allowance["collect"] > 0
    assert later["train_s"] == gpu_plan.command_training_s(budget, lease_left_s=later["left_s"], later=True)
    assert gpu_plan.lease_budget(kit, 600)["later"] == {"left_s": 0.0, "command_s": 0.0, "train_s": 0.0}
    long = gpu_plan.lease_budget(kit, 3600)["later"]  # a long lease: one command at most
    assert long["command_s"] == kit["command_s"] and long["train_s"] == kit["command_s"] - allowance["scoring"] - \
        allowance["collect"]


def test_the_plan_marks_the_runs_a_second_command_starts_each_ending_its_schedule_in_it(params):
    names = ["transformer_word_literal", "drnn_lwma", "ff2", "ffa"]
    budget = gpu_plan.lease_budget(params["gpu_kit"])
    roomy = gpu_plan.lease_plan(params, names, 2_100_000, 415, {}, later_s=415)
    assert roomy["selected"] == ["transformer_word_literal", "drnn_lwma"] and roomy["later"] == ["ff2", "ffa"]
    rows = {row["name"]: row for row in roomy["rows"]}
    ends = gpu_plan.project([rows["ff2"], rows["ffa"]], roomy["overhead"])
    assert all(end <= 415 for end in ends.values())  # no lease is spent on a partial record, in either command
    text = gpu_plan.plan_markdown(roomy["rows"], budget=budget, budget_s=415, selected=roomy["selected"],
                                  later=roomy["later"], later_s=415, overhead=roomy["overhead"], num_tokens=2_100_000,
                                  lease="the next lease")
    assert f"| {ends['ff2']:,.0f} (of 415, 2nd command) | starts (2nd command) |" in text
    assert "| transformer_word_literal |" in text and text.count("| starts |") == 2
    assert "**training 415 s** from its start" in text
    assert ("The next lease starts 4 of 4: in its first command transformer_word_literal, drnn_lwma; in a second "
            "command ff2, ffa.") in text and "none waits for the lease after" in text
    # a second command too short for them: they wait, and say so
    short = gpu_plan.lease_plan(params, names, 2_100_000, 415, {}, later_s=100)
    assert short["selected"] == roomy["selected"] and short["later"] == []
    text = gpu_plan.plan_markdown(short["rows"], budget=budget, budget_s=415, selected=short["selected"],
                                  later=short["later"], later_s=100, overhead=short["overhead"], num_tokens=2_100_000,
                                  lease="the next lease")
    assert "starts (2nd command)" not in text and "the others wait for the lease after (ff2, ffa)" in text
    # a launch's wave plans no second command: its text is as before
    wave = gpu_plan.lease_plan(params, names, 2_100_000, 415, {})
    assert wave["later"] == [] and "second command" not in gpu_plan.plan_markdown(
        wave["rows"], budget=budget, budget_s=415, selected=wave["selected"], overhead=wave["overhead"],
        num_tokens=2_100_000)


def test_graph_rates_are_derived_from_kernels_arithmetic_and_recurrent_steps(params):
    kit = params["gpu_kit"]
    graph = kit["graph"]
    _, train = run_config(params, "transformer_word")
    facts = graph["experiments"]["transformer"]
    expected = (facts["kernels"] * graph["kernel_us"] * 1e-6
                + facts["mflop_per_token"] * 1e6 * 32 * 10 / (graph["tflops"] * 1e12))
    assert gpu_plan.graph_step_s(kit, "transformer", train) == pytest.approx(expected)
    rows = {row["name"]: row for row in gpu_plan.plan_rows(params, list(PAPER_RUNS), 2_100_000, mode="graph")}
    # conservative beside the reviewer's estimate (170-250 steps/s for the Transformer, 650+ conv, 140-280 for the
    # (Bi)LSTMs, 50-80 DRNN-LWMA), and what the first lease must show: >= 80 steps/s for the paper Transformer
    transformer = rows["transformer_word"]["rates"]["graph"][0]
    assert 80 <= transformer <= 170 and rows["conv"]["rates"]["graph"][0] >= 500
    assert all(100 <= rows[name]["rates"]["graph"][0] <= 280 for name in ("blstm", "lstm", "wrn_blstm"))
    assert rows["drnn_lwma"]["rates"]["graph"][0] <= 80
    assert rows["ff2"]["mode"] == "eager" and "reads words" in rows["ff2"]["note"]  # never graphed
    literal = rows["transformer_word_literal"]
    assert literal["batch"] == "32 x 100" and literal["rates"]["graph"][0] < transformer  # ten times the tokens
    assert all(row["busy_s"] == pytest.approx(row["steps"] * row["gpu_step_s"]) for row in rows.values())


def test_a_dev_evaluation_keeps_what_its_measurement_s_counts_do_not_explain_and_derives_the_kernels_again():
    kit = {"dev_eval": {"kernel_us": 40, "tflops": 100, "assumed_s": {"default": 6.0, "ff2": 10.0},
                        "measured": {"transformer": {"s": 16.5, "kernels": 400_000, "gflop": 1000},
                                     "wrn": {"s": 5.3, "kernels": 2500, "gflop": 2000},
                                     "conv": {"s": 2.2, "kernels": 1600, "gflop": 1600}},
                        "counted": {"transformer": {"kernels": 30_000, "gflop": 1000},
                                    "transformer_word_literal": {"kernels": 100_000, "gflop": 1000},
                                    "wrn": {"kernels": 150, "gflop": 2000}, "ff2": {"kernels": 1600, "gflop": 7000}}}}
    # wrn: 5.3 s measured, 0.1 s of kernels and 0.02 s of arithmetic then; the rest (5.18 s) kept beside today's
    assert gpu_plan.dev_eval_s(kit, "wrn", "wrn") == (pytest.approx(5.3 - 0.1 + 0.006), "derived")
    # the Transformer's 400,000 kernels (16 s) and 0.01 s of arithmetic were nearly all of it (0.49 s kept); today's
    # 30,000 give 1.2 s + 0.49 + 0.01, under the fastest evaluation measured (conv's 2.2 s): the floor
    assert gpu_plan.dev_eval_s(kit, "transformer_word", "transformer") == (pytest.approx(2.2), "derived")
    # a run's own count before its experiment's (the literal reading's 100-token windows)
    assert gpu_plan.dev_eval_s(kit, "transformer_word_literal", "transformer") == (
        pytest.approx(0.49 + 4.0 + 0.01), "derived")
    # never measured on a GPU: assumed, whatever was counted
    assert gpu_plan.dev_eval_s(kit, "ff2", "ff2") == (10.0, "assumed")
    assert gpu_plan.dev_eval_s(kit, "lstm", "lstm") == (6.0, "assumed")


def test_the_plan_counts_each_run_s_evaluations_at_today_s_cost(params):
    rows = {row["name"]: row for row in gpu_plan.plan_rows(params, list(PAPER_RUNS), 2_100_000, mode="graph")}
    transformer, literal = rows["transformer_word"], rows["transformer_word_literal"]
    # the cached decoder at 1,024 windows a batch: a tenth of the old evaluation's kernels and more
    counted, measured = (params["gpu_kit"]["dev_eval"][key]["transformer"] for key in ("counted", "measured"))
    assert counted["kernels"] * 10 < measured["kernels"]
    assert transformer["eval_from"] == "derived" and transformer["eval_each_s"] < measured["s"] / 4
    assert literal["eval_each_s"] >= transformer["eval_each_s"] and literal["evaluations"] > transformer["evaluations"]
    assert all(row["eval_s"] == pytest.approx(row["evaluations"] * row["eval_each_s"]) for row in rows.values())
    text = gpu_plan.plan_markdown(list(rows.values()), budget=gpu_plan.lease_budget(params["gpu_kit"]), budget_s=415,
                                  selected=[], overhead=1.15, num_tokens=2_100_000)
    assert f"{transformer['evaluations']} x {transformer['eval_each_s']:.1f} (derived)" in text


def test_the_plan_s_header_keeps_the_lease_s_training_apart_from_a_wave_s_seconds_left(params):
    rows = gpu_plan.plan_rows(params, ["wrn"], 2_100_000, mode="graph")
    budget = gpu_plan.lease_budget(params["gpu_kit"])
    derived = f"**training {budget['train_s']:.0f} s**"
    text = gpu_plan.plan_markdown(rows, budget=budget, budget_s=budget["train_s"], selected=[], overhead=1.15,
                                  num_tokens=2_100_000)
    assert derived in text and "This plan has" not in text
    # a launch's wave, 15 s into a lease whose unpacking took less than its allowance: 30 s more than derived
    left = budget["train_s"] + 30
    text = gpu_plan.plan_markdown(rows, budget=budget, budget_s=left, selected=[], overhead=1.15,
                                  num_tokens=2_100_000, lease="wave 1", budget_why="left before the deadline")
    header = text.splitlines()[0]
    assert derived in header and f"min(lease less allowances {budget['by_lease']:.0f} s" in header
    assert f"**This plan has {left:.0f} s of training**: left before the deadline." in header
    assert f"ends at s (of {left:.0f})" in text


def row(name: str, own: float, busy: float, extra: float = 0.0) -> dict:
    return {"name": name, "own_s": own, "busy_s": busy, "extra_s": extra, "eval_s": extra, "steps": 100}


def test_runs_sharing_a_time_sliced_gpu_end_by_their_own_pace_or_their_share():
    rows = [row("a", 10, 10), row("b", 10, 30), row("c", 30, 5, extra=7)]
    ends = gpu_plan.project(rows, overhead=1.0)
    assert ends["a"] == 10 + 10 + 5  # a's 10 s of GPU, b's first 10, c's 5
    assert ends["b"] == 10 + 30 + 5
    assert ends["c"] == 7 + 30  # host-bound: its own pace
    assert gpu_plan.project(rows, overhead=2.0)["a"] == 50
    # in priority order, each run that ends in the budget with every one chosen before still ending in it
    assert gpu_plan.select(rows, budget_s=45, overhead=1.0) == ["a", "b", "c"]
    assert gpu_plan.select(rows, budget_s=44, overhead=1.0) == ["a", "b"]  # with c, b would end at 45
    assert gpu_plan.select(rows, budget_s=39, overhead=1.0) == ["a", "c"]  # b alone beside a ends at 40
    assert gpu_plan.select(rows, budget_s=30, overhead=1.0, running=[row("r", 0, 25)]) == []
    left = gpu_plan.remaining({**row("a", 10, 20, extra=8), "eval_s": 4}, 75)
    assert (left["own_s"], left["busy_s"], left["extra_s"]) == (2.5, 5.0, 1.0)


def lease(name: str, device: str | None, runs: dict, scale: float | None = None) -> dict:
    return {"lease": name, "device": device, "gpu_busy_scale": scale, "runs": runs}


def test_the_best_known_rate_of_each_run_and_mode_comes_from_gpu_leases_only():
    word = {"experiment": "transformer", "tokens_per_step": 320, "requested_mode": "graph", "mode": "graph",
            "mode_from": "record", "first_steps": {"steps_per_s": 90.0}, "whole_run": {"steps_per_s": 95.0,
                                                                                        "eval_s_each": 3.0}}
    slow = {**word, "first_steps": {"steps_per_s": 60.0}, "whole_run": None}
    fell = {"experiment": "lstm", "tokens_per_step": 3200, "requested_mode": "graph", "mode": "eager",
            "mode_from": "record", "mode_reason": "capture failed", "whole_run": {"steps_per_s": 30.0}}
    leases = [lease("1_h100", "NVIDIA H100", {"transformer_word": word, "lstm": fell}, scale=0.8),
              lease("2_h200", "NVIDIA H200", {"transformer_word": slow}, scale=1.2),
              lease("3_cpu", None, {"transformer_word": {**word, "first_steps": {"steps_per_s": 999.0}}}, scale=9)]
    known = gpu_rates.known_rates(leases)
    assert known["rates"][("transformer_word", "graph")] == {"steps_per_s": 95.0, "where": "NVIDIA H100, lease 1_h100"}
    assert known["rates"][("transformer", 320, "graph")]["steps_per_s"] == 95.0  # the other Transformers' too
    assert known["eval_s"]["transformer_word"] == 3.0 and known["fallbacks"] == {"lstm": "capture failed"}
    assert known["scale"] == {"gpu_busy_scale": 1.2, "lease": "2_h200"}  # the latest GPU lease's; never the CPU's
    assert ("lstm", "eager") in known["rates"] and ("lstm", "graph") not in known["rates"]


def test_the_plan_takes_measured_rates_and_fallbacks(params):
    known = {"rates": {("transformer", 320, "graph"): {"steps_per_s": 200.0, "where": "H100, lease 1"},
                       ("lstm", "eager"): {"steps_per_s": 30.0, "where": "H100, lease 1"}},
             "eval_s": {"transformer_speech": 1.5}, "fallbacks": {"lstm": "capture failed"}, "scale": None}
    rows = {row["name"]: row for row in gpu_plan.plan_rows(params, ["transformer_speech", "lstm", "conv"], 2_100_000,
                                                            known=known, mode="graph")}
    speech = rows["transformer_speech"]
    assert speech["steps_per_s"] == 200.0 and speech["rates"]["graph"][1] == "measured, H100, lease 1"
    assert speech["eval_s"] == pytest.approx(1.5 * (speech["steps"] // 2000 + 2))
    assert rows["lstm"]["mode"] == "eager" and rows["lstm"]["steps_per_s"] == 30.0
    assert "fell back to eager: capture failed" in rows["lstm"]["note"]
    assert rows["conv"]["rates"]["graph"][1] == "derived"


def test_the_gpu_busy_scale_is_the_measured_busy_share_over_the_derived_one():
    rows = [{"name": "a", "gpu_step_s": 0.004}, {"name": "b", "gpu_step_s": 0.002}, {"name": "c", "gpu_step_s": None}]
    # predicted busy share 100 x 0.004 + 50 x 0.002 = 0.5 of the time; measured 0.75: steps take 1.5x the derivation
    assert gpu_plan.calibration(rows, {"a": 100.0, "b": 50.0, "c": 10.0}, 0.75) == 1.5
    assert gpu_plan.calibration(rows, {"a": 100.0}, None) is None
    assert gpu_plan.calibration(rows, {"a": 1.0}, 1.0) == 5.0  # clipped


def test_a_lease_s_rates_carry_device_mode_and_both_rates_and_file_by_lease(tmp_path):
    state = {"started": 1_700_000_000.0, "deadline": 1_700_000_460.0,
             "runs": {"conv": {"started": 1_700_000_050.0}, "lstm": {"started": 1_700_000_050.0}},
             "plan": {"runs": {"conv": {"experiment": "conv", "tokens": 3200, "mode": "graph", "wave": 1},
                               "lstm": {"experiment": "lstm", "tokens": 3200, "mode": "graph", "wave": 2}},
                      "first_wave": ["conv"], "second_wave": ["lstm"], "utilization": 0.4, "gpu_busy_scale": 0.9}}
    measurement = {"conv": {"steps_per_second": 700.0, "steps": 200, "partial": False, "gpu_memory_mib": 900}}
    records = {"conv": {"run": {"steps_per_s": 650.0, "steps_completed": 10, "steps_scheduled": 10,
                                "full_schedule": True, "train_s": 20.0, "eval_s": 12.0, "step_mode": "graph",
                                "train": {"eval_every_steps": 5, "epochs": 1}}}}
    record = gpu_rates.lease_record(state, measurement, records, gpu="NVIDIA H100 80GB HBM3",
                                    software={"torch": "2.11.0"}, git={"commit": "abc"})
    # named by the command's start to the second: each command of a lease files its own rates
    assert record["lease"] == "20231114T221320Z_nvidia-h100-80gb-hbm3" and record["train_s"] == 460.0
    assert record["command"] == 1 and record["lease_started"] == record["started"] == "2023-11-14T22:13:20Z"
    conv, lstm = record["runs"]["conv"], record["runs"]["lstm"]
    assert conv["mode"] == "graph" and conv["mode_from"] == "record" and conv["first_steps"]["steps_per_s"] == 700.0
    assert conv["whole_run"]["steps_per_s"] == 650.0 and conv["whole_run"]["eval_s_each"] == 4.0
    assert lstm["mode_from"] == "requested" and "whole_run" not in lstm and lstm["wave"] == 2
    path = gpu_rates.file_lease(record, tmp_path)
    assert path.name == f"{record['lease']}.json" and gpu_rates.load_leases(tmp_path) == [record]
    known = gpu_rates.known_rates([record])
    assert known["rates"][("conv", "graph")]["steps_per_s"] == 700.0
    now = gpu_rates.with_measurement(known, {"lstm": 150.0, "x": None}, {"lstm": "graph", "x": "graph"}, 1.1, "here")
    assert now["rates"][("lstm", "graph")] == {"steps_per_s": 150.0, "where": "here"}
    assert now["scale"] == {"gpu_busy_scale": 1.1, "lease": "here"} and ("x", "graph") not in now["rates"]


def test_the_thirteenth_run_is_the_literal_reading_and_the_report_sets_both_side_by_side(params):
    assert len(PAPER_RUNS) == 13 and list(PAPER_RUNS)[:5] == [
        "transformer_learned", "transformer_word", "transformer_word_literal", "transformer_speech",
        "transformer_word_speech"]  # the Transformers first: the kit's priority
    _, ten = run_config(params, "transformer_word")
    _, literal = run_config(params, "transformer_word_literal", ["max_steps=3"])
    assert (ten["seq_len"], ten["decode_window"]) == (10, 10)
    assert (literal["seq_len"], literal["warmup_steps"], literal["lr"], literal["epochs"]) == (100, 4000, 1e-4, 20)
    assert literal["decode_window"] is None and literal["max_steps"] == 3
    assert PAPER_RUNS["transformer_word_literal"].published == "yi_tao_2019/word"

    def record(dev: float, ref: float, full: bool = True) -> dict:
        scores = {"OVERALL": {"f1": ref}, "SER": 0.5}
        return {"ref": scores, "asr": scores, "run": {"steps_completed": 10 if full else 5, "steps_scheduled": 10,
                                                      "full_schedule": full, "best_dev_f1": dev, "best_step": 9}}
    pending = "\n".join(readings_markdown({"transformer_word": record(0.50, 0.52)}))
    assert "| transformer_word_literal | 32 x 100 tokens, warm-up 4,000 to 1e-4, 20 epochs | **missing** |" in pending
    assert "| 10 (of 10) | 50.0 (9) | 52.0 | 50.0 | 52.0 | 50.0 |" in pending and "keeps the 10-token reading" in pending
    decided = "\n".join(readings_markdown({name: record(dev, 0.6) for name, dev in zip(READINGS, (0.50, 0.54))}))
    assert "keeps **transformer_word_literal**" in decided and "(50.0 vs 54.0)" in decided
    # a partial record decides nothing, however high its dev F1
    assert "keeps the 10-token" in "\n".join(readings_markdown({"transformer_word": record(0.5, 0.5),
                                                                "transformer_word_literal": record(0.9, 0.9, False)}))


def test_a_record_carries_the_step_mode_and_why_and_the_numerics(tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    scores = {"OVERALL": {"f1": 0.5}, "SER": 0.5}
    metrics = {"steps": 4, "steps_scheduled": 4, "train_seconds": 2.0, "device": "NVIDIA H100 80GB HBM3",
               "step_mode": "eager", "step_mode_reason": "no CUDA"}
    made = paper_record("conv", scores={"ref": scores, "asr": scores}, train_metrics=metrics, model_config={},
                        train_config={}, features_dir=tmp_path, window=100, stride=50, profile="paper", published=None)
    run = made["run"]
    assert (run["step_mode"], run["step_mode_reason"], run["steps_per_s"]) == ("eager", "no CUDA", 2.0)
    assert run["device"] == "NVIDIA H100 80GB HBM3" and run["software"]["torch"] and run["full_schedule"]
    assert run["numerics"] == numeric_facts()  # the floor, the switches, the CPU, OpenBLAS's and torch's kernels
    older = paper_record("conv", scores={"ref": scores, "asr": scores}, train_metrics={"steps": 1, "steps_scheduled": 2},
                         model_config={}, train_config={}, features_dir=tmp_path, window=100, stride=50,
                         profile="paper", published=None)["run"]
    assert older["step_mode"] is None and older["full_schedule"] is False  # a trainer that does not record it


def test_the_committed_plan_of_the_next_lease_is_what_plan_writes_now(tmp_path):
    from paper_runs import __main__ as paper

    committed = (REPO / "metrics/gpu/next_lease.md").read_text(encoding="utf-8")
    tokens = int(committed.split(" training tokens.")[0].rsplit(". ", 1)[1].replace(",", ""))
    features = tmp_path / "features"  # the training split's size the committed plan was made for
    features.mkdir()
    (features / "manifest.json").write_text(json.dumps({"splits": {"train": {"tokens": tokens}}}))
    written = tmp_path / "next_lease.md"
    assert paper.main(["--params", str(REPO / "params.yaml"), "--records", str(REPO / "metrics/paper"), "plan",
                       "--kit", str(tmp_path / "no_kit"), "--features", str(features),
                       "--rates-dir", str(REPO / "metrics/gpu/leases"), "--lease-s", "900",
                       "--write", str(written)]) == 0
    assert written.read_text(encoding="utf-8") == committed, \
        "metrics/gpu/next_lease.md is stale: python -m paper_runs plan --lease-s 900 --write metrics/gpu/next_lease.md"
