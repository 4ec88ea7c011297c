"""The real dvc.yaml on a tiny corpus: a full `dvc repro`, a second one that does nothing, and a changed
training setting that reruns only what depends on it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.fixture_checkpoints import make_checkpoint
from tests.fixture_corpus import TINY_MODEL, TINY_TRAIN, write_corpus
from tests.fixture_earnings22 import write_earnings22
from tests.fixture_real_speech import write_real_talks
from tests.helpers import PACKAGES

REPO = Path(__file__).resolve().parents[1]
DVC = Path(sys.executable).with_name("dvc")
#: and the committed inputs the stages read (the paper runs' Speech2Vec coverage, a section of the Speech2Vec report)
SOURCES = ["dvc.yaml", "pyproject.toml", *PACKAGES, "reports/paper_speech2vec/coverage.json"]

pytestmark = [pytest.mark.skipif(not DVC.exists(), reason="dvc is not installed next to this Python"),
              pytest.mark.slow]  # a real `dvc repro` of the whole pipeline: minutes


def tiny_params(corpus: dict[str, Path]) -> dict:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["profile"] = "tiny"
    # the encoder punctuator reads a longer draw of the same talks (stage draw@long), as in the default pipeline
    params["experiments"] = {"minilm": {"features": "data/draws/long/features"},
                             "transformer": {"features": "data/features"}, "blstm": {"features": "data/features"}}
    params["draws"] = {"long": 5000}
    params["data"].update(iwslt_dir=str(corpus["iwslt"]), ted_talks=str(corpus["ted"]))
    params["audio"]["real_audio_dir"] = str(corpus["iwslt"])  # a dependency of synthesize (read with source: real)
    params["audio"]["tedlium_dir"] = str(corpus["iwslt"])  # likewise (read with source: tedlium)
    params["embed"]["word_source"] = {"type": "word2vec-text", "path": str(corpus["vectors"])}
    params["evaluate"].update(window=30, stride=15)
    # speech for two training talks only: enough for Speech2Vec and the speech feature sets to run for real
    params["audio"]["split_tokens"] = {"train": 600}
    params["speech2vec"].update(dim=8, encoder_hidden=8, decoder_hidden=8, epochs=1, min_count=1, batch_size=16,
                                threads=1, train_splits=["train"])
    # the default's runs (the speech models and their controls start from the text models), and one more feature set
    tuning = {"max_steps": 4, "eval_every_steps": 2}
    params["variants"] = {"transformer_word_speech": {"experiment": "transformer", "features": "word_speech"},
                          "blstm_word_acoustic": {"experiment": "blstm", "features": "word_acoustic"}}
    # the MiniLM pair reads the speech mix (TED's simulated cues and Earnings-22 train's real ones), the BLSTM's TED's
    params["tunings"] = {name: {"from": base, "features": features, "train": tuning}
                         for base, suffix in (("minilm", "_mix"), ("blstm", "")) for name, features in (
                             (f"{base}_word_pauses{suffix}", f"word_pauses{suffix}"),
                             (f"{base}_word_pauses{suffix}_control", f"word_pauses{suffix}_control"))}
    params["data"]["earnings22_dir"] = str(write_earnings22(corpus["iwslt"].parent / "earnings22"))
    real = corpus["iwslt"].parent / "ted_real"
    params["data"].update(real_speech_dir=str(real), real_speech_talks=write_real_talks(real), excluded_talks=[])
    params["profiles"]["tiny"] = {
        "data": {"train_tokens": 3000},
        "train": {**TINY_TRAIN, "epochs": 1},
        "experiments": {
            # the encoder punctuator on a tiny local checkpoint (a user's own checkpoint directory)
            "minilm": {"model": {"pretrained": str(make_checkpoint(corpus["iwslt"].parent / "checkpoint", "bert")),
                                 "max_subwords": 128},
                       "train": {"lr": 0.003, "max_steps": 6, "eval_every_steps": 3}},
            "transformer": {"published": "yi_tao_2019/word", "model": TINY_MODEL, "train": {}},
            "blstm": {"model": {"name": "blstm", "hidden": 16, "layers": 1, "dropout": 0.1}, "train": {"lr": 0.01}},
        },
    }
    return params


def params_of(workdir: Path) -> dict:
    return yaml.safe_load((workdir / "params.yaml").read_text())


def dvc(workdir: Path, *args: str) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(workdir)}
    result = subprocess.run([str(DVC), *args], cwd=workdir, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def ran_stages(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")}


def test_dvc_repro_runs_once_and_reruns_only_what_changed(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    workdir = tmp_path / "project"
    workdir.mkdir()
    for name in SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, workdir / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (workdir / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, workdir / name)
    (workdir / "params.yaml").write_text(yaml.safe_dump(tiny_params(corpus)))
    subprocess.run(["git", "init", "-q"], cwd=workdir, check=True)
    dvc(workdir, "init", "-q")
    dvc(workdir, "config", "core.autostage", "false")

    first = ran_stages(dvc(workdir, "repro"))
    variant_stages = {f"{stage}@{run}" for stage in ("train_variant", "evaluate_variant")
                      for run in ("transformer_word_speech", "blstm_word_acoustic")}
    variant_stages |= {f"{stage}@{run}" for stage in ("tune", "evaluate_tuning")
                       for run in params_of(workdir)["tunings"]}
    feature_sets = {f"embed_set@{name}" for name in params_of(workdir)["embed"]["feature_sets"]}
    experiments = {f"{stage}@{name}" for stage in ("train", "evaluate") for name in ("minilm", "transformer", "blstm")}
    assert first == {"prepare", "word_vectors", "embed", "draw@long", "report", "synthesize", "align", "features",
                     "speech2vec", "report_variants", "fit_pauses", "evaluate_real", "prepare_earnings22",
                     "evaluate_earnings22"} | experiments | variant_stages | feature_sets
    drawn = json.loads((workdir / "metrics" / "draws" / "long.json").read_text())
    prepared = json.loads((workdir / "metrics" / "data.json").read_text())
    assert prepared["tokens"]["train"] <= 3000 < drawn["tokens"]["train"] <= 5000
    def vocabulary(folder: Path) -> str:
        return json.loads((folder / "embedder" / "embedder.json").read_text())["vocab_sha256"]

    # the encoder trained on the draw's words (its vocabulary), the BLSTM on the training set's
    assert vocabulary(workdir / "artifacts" / "minilm" / "model") == vocabulary(workdir / "data" / "draws" / "long" /
                                                                                  "features")
    assert vocabulary(workdir / "artifacts" / "blstm" / "model") == vocabulary(workdir / "data" / "features")
    assert vocabulary(workdir / "data" / "features") != vocabulary(workdir / "data" / "draws" / "long" / "features")
    real_report = (workdir / "reports" / "real_speech.md").read_text()
    assert "| audio_model (MiniLM encoder, words + timing cues) | text + real timings |" in real_report
    for name in ("audio_control", "blstm_text", "blstm_audio", "blstm_control", "word_speech2vec", "transformer_words"):
        assert f"| {name} (" in real_report, name
    # the Earnings-22 test calls through punctuate: the text model, the speech model and its control
    earnings22 = (workdir / "reports" / "earnings22_test.md").read_text()
    assert "| audio_model (MiniLM encoder, words + timing cues) | text + real timings |" in earnings22
    assert "| audio_control (MiniLM encoder, words + label-free timing cues) | text + real timings |" in earnings22
    mix = json.loads((workdir / "data" / "pauses" / "mix" / "mix.json").read_text())
    assert [part["source"] for part in mix["parts"]] == ["ted train (simulated cues)", "earnings22 train (real cues)"]
    for base, run in (("minilm", "minilm_word_pauses_mix"), ("blstm", "blstm_word_pauses")):
        audio_model = json.loads((workdir / "variant_artifacts" / run / base / "model" / "config.json").read_text())
        assert audio_model["initialised_from"]["path"] == f"artifacts/{base}/model"
        assert audio_model["metrics"]["steps"] == 4
    # the encoder's model directory carries its tokenizer and configuration (it punctuates without the checkpoint)
    assert (workdir / "artifacts" / "minilm" / "model" / "encoder" / "config.json").is_file()
    # and the encoder's trace, which punctuate loads without transformers (the text model is the fine-tuned minilm)
    text_model = workdir / params_of(workdir)["punctuate"]["text_model"]
    assert text_model == workdir / "artifacts" / "minilm" / "model"
    assert (text_model / "encoder" / "traced.pt").is_file()
    # a feature set no variant uses is not built
    assert (workdir / "data" / "feature_sets" / "learned" / "NOT_BUILT.txt").is_file()
    assert json.loads((workdir / "metrics" / "feature_sets" / "learned.json").read_text())["built"] is False
    summary = (workdir / "reports" / "summary.md").read_text()
    assert "| transformer_word_speech | transformer | word + speech (sum) |" in summary
    variants_report = (workdir / "reports" / "variants.md").read_text()
    assert "| blstm_word_acoustic |" in variants_report and "| blstm |" in variants_report
    speech2vec = json.loads((workdir / "metrics" / "speech2vec.json").read_text())
    assert speech2vec["training_segments"] > 100 and speech2vec["vocabulary"] > 10
    scores = json.loads((workdir / "metrics" / "eval" / "transformer.json").read_text())
    # the Transformer is also scored with its input cut at the gold sentence ends (evaluate.segmented_experiments)
    assert set(scores) == {"model", "ref", "asr", "ref_segmented", "asr_segmented"}
    assert 0 <= scores["ref"]["OVERALL"]["f1"] <= 1 and scores["ref_segmented"]["tokens"] == scores["ref"]["tokens"]
    assert "ref_segmented" not in json.loads((workdir / "metrics" / "eval" / "minilm.json").read_text())
    assert scores["model"] == "artifacts/transformer/model"  # the metrics name the model directory they scored
    report = (workdir / "reports" / "results.md").read_text()
    assert "Ref, cut at gold sentence ends" in report
    assert "| transformer" in report and "| blstm" in report and "69.4" in report  # published word variant
    figures = workdir / "reports" / "figures"
    for name in ("blstm_confusion_ref.png", "transformer_learning_curves.png", "blstm_word_cancellation.png",
                 "transformer_word_cancellation.png"):
        assert (figures / name).exists(), name
        assert f"figures/{name}" in report
    assert (workdir / "checkpoints" / "blstm" / "checkpoint.pt").exists()  # kept for resuming

    assert ran_stages(dvc(workdir, "repro")) == set()  # nothing changed, nothing runs
    assert "up to date" in dvc(workdir, "status")

    # the word-vector file named in params is a dependency: edited in place, it reruns what reads it
    vectors = Path(params_of(workdir)["embed"]["word_source"]["path"])
    original = vectors.read_bytes()
    vectors.write_bytes(original.replace(b" 0.", b" 0.1", 1))
    assert "embed" in dvc(workdir, "status")
    vectors.write_bytes(original)
    assert "up to date" in dvc(workdir, "status")

    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["profiles"]["tiny"]["experiments"]["blstm"]["train"]["lr"] = 0.02
    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    rerun = ran_stages(dvc(workdir, "repro"))
    assert "train@blstm" in rerun and "evaluate@blstm" in rerun
    # the runs tuned from the BLSTM and the BLSTM's own variant (its training settings) rerun; the other
    # experiments' runs, and those tuned from another model, do not
    assert {"tune@blstm_word_pauses", "tune@blstm_word_pauses_control", "train_variant@blstm_word_acoustic"} <= rerun
    unrelated = rerun & ({"prepare", "embed", "draw@long", "train@transformer", "evaluate@transformer", "synthesize",
                          "align", "features", "speech2vec", "train@minilm", "tune@minilm_word_pauses_mix",
                          "train_variant@transformer_word_speech"} | feature_sets)
    assert not unrelated

    # swapping how one feature set combines word and speech reruns that set and its runs only
    params["embed"]["feature_sets"]["word_speech"]["combine"] = "concat"
    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    swapped = ran_stages(dvc(workdir, "repro"))
    rerun_run = {"embed_set@word_speech", "train_variant@transformer_word_speech",
                 "evaluate_variant@transformer_word_speech"}
    # the reports read the run's metrics (and evaluate_real its model): they rerun when those bytes changed -- on
    # this tiny corpus both inputs may give the same scores, and metrics hold no times, so they may not
    assert rerun_run <= swapped <= rerun_run | {"report_variants", "report", "evaluate_real", "evaluate_earnings22"}
    manifest = json.loads((workdir / "data" / "feature_sets" / "word_speech" / "manifest.json").read_text())
    assert manifest["speech"]["combine"] == "concat" and manifest["dim"] == 16
