import pytest

from reporting.results import example_window, load_published, published_figures, results_markdown


def scores(f1):
    cls = {"precision": f1, "recall": f1, "f1": f1}
    return {"COMMA": cls, "PERIOD": cls, "QUESTION": cls, "OVERALL": cls, "SER": 1 - f1, "tokens": 10}


def test_results_table_puts_published_figures_beside_ours():
    experiments = {"transformer": {"eval": {"ref": scores(0.5), "asr": scores(0.4)},
                                   "train": {"best_dev_f1": 0.55, "steps": 1000, "best_step": 950},
                                   "published": "yi_tao_2019/word"},
                   "blstm": {"eval": {"ref": scores(0.5)}, "train": {"best_dev_f1": 0.5, "steps": 1000,
                                                                       "best_step": 600}},
                   "minilm": {"eval": {"ref": scores(0.6)}, "train": {"best_dev_f1": 0.6, "steps": 1600,
                                                                        "best_step": 1400,
                                                                        "kept": {"rule": "last", "step": 1600}}}}
    text = results_markdown("small", experiments, load_published())
    training = {line.split("|")[1].strip(): line for line in text.splitlines() if line.count("|") == 5}
    assert "950 (*still improving*)" in training["transformer"]
    assert "600 |" in training["blstm"] and "still improving" not in training["blstm"]
    assert training["minilm"].endswith("| 1400 | 1600 (the model: step 1600's weights) |")  # train.keep: last
    assert "reduced CPU profile" in text
    assert "seconds" not in text and "tokens/s" not in text  # a rerun must give the same report
    ref_row = next(line for line in text.splitlines() if line.startswith("| transformer (reduced) | Ref"))
    assert "**50.0**" in ref_row and "69.4" in ref_row
    asr_row = next(line for line in text.splitlines() if line.startswith("| transformer (reduced) | ASR"))
    assert "65.3" in asr_row and "60.0" in asr_row  # SER 0.6


def test_unknown_published_reference_is_an_error():
    with pytest.raises(ValueError, match="unknown published reference"):
        published_figures("yi_tao_2019/nothing", load_published())


def test_example_window_centres_on_a_period():
    labels = ["O"] * 30 + ["PERIOD"] + ["O"] * 10
    start, end, target = example_window(labels, after_token=5)
    assert labels[start + target] == "PERIOD" and end - start == 20
    with pytest.raises(ValueError):
        example_window(["O"] * 50, after_token=0)


def test_variants_table_lists_the_word_run_first_and_published_figures(tmp_path):
    import json

    from reporting.results import collect_variants, variants_markdown

    def write(path, value):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))

    write(tmp_path / "eval" / "transformer.json", {"ref": scores(0.5), "asr": scores(0.4)})
    write(tmp_path / "train" / "transformer.json", {"best_dev_f1": 0.5})
    variants = {"transformer_word_speech": {"experiment": "transformer", "features": "word_speech",
                                            "published": "yi_tao_2019/word_speech"}}
    write(tmp_path / "eval_variants" / "transformer_word_speech" / "transformer.json",
          {"ref": scores(0.6), "asr": scores(0.45)})
    write(tmp_path / "train_variants" / "transformer_word_speech" / "transformer.json", {"best_dev_f1": 0.6})
    # a run without its own published reference gets Yi & Tao's figure for the same input, marked
    variants["transformer_speech"] = {"experiment": "transformer", "features": "speech"}
    write(tmp_path / "eval_variants" / "transformer_speech" / "transformer.json",
          {"ref": scores(0.42), "asr": scores(0.38)})
    write(tmp_path / "train_variants" / "transformer_speech" / "transformer.json", {"best_dev_f1": 0.4})
    experiments = {"transformer": {"published": "yi_tao_2019/word"}}
    by_experiment = collect_variants(variants, experiments, tmp_path / "eval", tmp_path / "train",
                                     tmp_path / "eval_variants", tmp_path / "train_variants")
    assert [row["run"] for row in by_experiment["transformer"]] == ["transformer", "transformer_word_speech",
                                                                     "transformer_speech"]
    coverage = {"word_speech": {"train": {"coverage_speech_tokens": 83.5}, "ref": {"coverage_speech_tokens": 85.7}}}
    text = variants_markdown("small", by_experiment, load_published(), coverage, None, "punctuated")
    word_row = next(line for line in text.splitlines() if line.startswith("| transformer |"))
    both_row = next(line for line in text.splitlines() if line.startswith("| transformer_word_speech |"))
    assert "69.4" in word_row and "**50.0**" in word_row
    assert "72.9" in both_row and "68.8" in both_row and "**60.0**" in both_row and "83.5" in both_row
    cells = [cell.strip() for cell in both_row.strip("|").split("|")]
    assert cells[6:8] == ["+10.0", "+5.0"]  # ours minus the word-only run, Ref and ASR
    assert cells[10] == "+3.5"  # 72.9 - 69.4 in the paper
    speech_row = next(line for line in text.splitlines() if line.startswith("| transformer_speech |"))
    assert "71.6†" in speech_row and "67.5†" in speech_row and "-8.0" in speech_row
    missing = {"x": {"experiment": "transformer", "features": "speech"}}
    with pytest.raises(FileNotFoundError, match="x"):
        collect_variants(missing, experiments, tmp_path / "eval", tmp_path / "train", tmp_path / "eval_variants",
                         tmp_path / "train_variants")


def test_the_stage_time_table_comes_from_the_stage_records(tmp_path):
    import json

    from pipeline.stage_times import main as stage_times_main
    from reporting.stage_times import read_stage_times

    records = tmp_path / "timings"
    records.mkdir()
    for stage, seconds, finished, extra in (
            ("prepare", 25.4, "2026-11-25T10:00:25+00:00", {}),
            ("train@blstm", 188.0, "2026-11-25T10:03:40+00:00",
             {"metrics/train/blstm.json": {"train_tokens_per_second": 23512.3, "train_seconds": 180.1}}),
            ("evaluate@blstm", 4.2, "2026-11-25T10:03:45+00:00", {})):
        (records / f"{stage}.json").write_text(json.dumps({"stage": stage, "seconds": seconds, "finished": finished,
                                                           **extra}))
    page, readme = tmp_path / "benchmarks.md", tmp_path / "README.md"
    page.write_text("# T\n\n<!-- stage-times:start -->\nold\n<!-- stage-times:end -->\nafter\n")
    readme.write_text("# R\n<!-- run-time:start -->\nold\n<!-- run-time:end -->\nrest\n")
    assert stage_times_main(["--timings", str(records), "--page", str(page), "--readme", str(readme),
                             "--machine", "2 cores", "--setup-seconds", "70"]) == 0
    text = page.read_text()
    assert "**3.6 min** in all" in text and "2 cores; finished 2026-11-25" in text and "old" not in text
    assert "| prepare | 25 | evaluate@blstm | 4 |" in text
    assert "| train@blstm (23,512 tokens/s) | 188 |  |  |" in text
    assert text.endswith("<!-- stage-times:end -->\nafter\n")
    line = readme.read_text()
    assert "**3.6 min** (set-up 70 s before it) on 2 cores" in line and "old" not in line
    assert line.startswith("# R\n<!-- run-time:start -->\nThe default `dvc repro`") and line.endswith("end -->\nrest\n")
    (records / "broken.json").write_text("{}")
    with pytest.raises(ValueError, match="broken.json: not a stage record"):
        read_stage_times(records)
