"""prepare -> embed -> train -> evaluate -> punctuate on a tiny corpus, through the library and the CLIs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from corpus.iwslt import read_iwslt
from embeddings.cache import build_feature_cache
from evaluation.benchmark import evaluate_model
from tests.fixture_corpus import SPLIT_FILES, TINY_MODEL, TINY_TRAIN, write_corpus
from training import train_model
from trainset.prepare import prepare_data

REPO = Path(__file__).resolve().parents[1]
#: Every test shares the module's prepared, cached and trained tiny corpus, and most start `punctuate` or the
#: scorer as subprocesses: the whole module is slow.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    corpus = write_corpus(root)
    prepared = prepare_data(corpus["iwslt"], corpus["ted"], root / "prepared", eval_splits=SPLIT_FILES,
                            train_tokens=6000, overlap_ngram=8, overlap_min_shared_fraction=0.02, seed=1)
    features = root / "features"
    build_feature_cache(root / "prepared", features,
                        word_source={"type": "word2vec-text", "path": str(corpus["vectors"])}, oov="random")
    result = train_model(features, root / "model", root / "state", model_config=TINY_MODEL,
                         train_config=TINY_TRAIN, window=30, stride=15)
    return {"root": root, "prepared": prepared, "features": features, "model": root / "model", "result": result}


def test_training_writes_a_self_contained_model_directory(trained):
    model_dir = trained["model"]
    for name in ("model.pt", "config.json", "history.csv", "learning_curves.png", "embedder/embedder.json"):
        assert (model_dir / name).exists(), name
    metrics = trained["result"].metrics
    assert metrics["completed"] and metrics["steps"] > 0
    assert metrics["best_dev_f1"] > 0.6  # the marks are predictable from words: far above chance
    history = (model_dir / "history.csv").read_text().splitlines()
    assert history[0] == "step,epoch,train_loss,dev_loss,dev_f1,lr" and len(history) > 3


def test_evaluation_scores_both_test_sets(trained, tmp_path):
    results = evaluate_model(trained["model"], trained["root"] / "prepared", tmp_path, splits=["ref", "asr"],
                             features_dir=trained["features"])
    assert results["model"] == str(trained["model"])  # the metrics name the model directory they scored
    for split in ("ref", "asr"):
        scores = results[split]
        assert set(scores) >= {"COMMA", "PERIOD", "QUESTION", "OVERALL", "SER", "tokens"}
        assert scores["OVERALL"]["f1"] > 0.6
        predictions = read_iwslt(tmp_path / f"{split}.tsv")
        reference = read_iwslt(trained["root"] / "prepared" / f"{split}.tsv")
        assert predictions.words == reference.words
        assert (tmp_path / f"confusion_{split}.png").stat().st_size > 0
        # the standalone scorer agrees with the stage on the written predictions
        out = subprocess.run([sys.executable, "-m", "pipeline.evaluate", str(trained["root"] / "prepared" / f"{split}.tsv"),
                              str(tmp_path / f"{split}.tsv")], cwd=REPO, capture_output=True, text=True, check=True)
        assert json.loads(out.stdout)["OVERALL"] == pytest.approx(scores["OVERALL"])


def test_segmented_protocol_labels_each_reference_sentence_alone(trained, tmp_path):
    """`<split>_segmented`: the words of every reference sentence labelled as a sequence of their own -- the same
    labels as punctuating that sentence's words alone."""
    from evaluation.benchmark import Punctuator, sentence_spans

    results = evaluate_model(trained["model"], trained["root"] / "prepared", tmp_path, splits=["ref"],
                             segmented_splits=["ref"])
    reference = read_iwslt(trained["root"] / "prepared" / "ref.tsv")
    spans = sentence_spans(reference.labels)
    scores = results["ref_segmented"]
    assert scores["sentences"] == len(spans) > 1 and scores["tokens"] == len(reference.words)
    predicted = read_iwslt(tmp_path / "ref_segmented.tsv")
    assert predicted.words == reference.words
    punctuator = Punctuator(trained["model"])
    start, end = spans[1]
    assert predicted.labels[start:end] == punctuator.punctuate_words(reference.words[start:end])
    assert "asr_segmented" not in results


def run_punctuate(model_dir: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inference.cli", "--model", str(model_dir), *args],
                          cwd=REPO, input=stdin, capture_output=True, text=True)


def test_punctuate_on_a_test_set_gives_the_labels_the_evaluate_stage_scored(trained, tmp_path):
    """One decoding path: a user running `punctuate --format iwslt` on the words of a benchmark file (one word a
    line, as `cut -f1` gives them) gets exactly the labels the evaluate stage scored."""
    reference = trained["root"] / "prepared" / "ref.tsv"
    evaluate_model(trained["model"], trained["root"] / "prepared", tmp_path, splits=["ref"])
    words = tmp_path / "ref.words.txt"
    words.write_text("".join(f"{word}\n" for word in read_iwslt(reference).words), encoding="utf-8")
    result = run_punctuate(trained["model"], str(words), "--format", "iwslt", "-o", str(tmp_path / "user.tsv"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "user.tsv").read_text() == (tmp_path / "ref.tsv").read_text()


def test_punctuate_text_and_iwslt_output(trained, tmp_path):
    text = "The river stone well the story done the man right the world however the city finished " * 40
    source = tmp_path / "input.txt"
    source.write_text(text.upper())  # the model reads lower case; the user's capitals come back as given
    result = run_punctuate(trained["model"], str(source), "-o", str(tmp_path / "out.txt"))
    assert result.returncode == 0, result.stderr
    output = (tmp_path / "out.txt").read_text()
    assert output[0].isupper() and "DONE." in output and "FINISHED." in output
    # nothing is lost: the same words come back, in order and case, whatever the length (here 640 words)
    words = [w.strip(".,?") for w in output.split()]
    assert words == text.upper().split()

    iwslt = run_punctuate(trained["model"], "--format", "iwslt", stdin=text)
    lines = iwslt.stdout.splitlines()
    assert len(lines) == len(text.split())
    assert lines[6] == "done\tPERIOD" and lines[15] == "finished\tPERIOD"


def test_punctuate_empty_and_bad_input(trained, tmp_path):
    empty = run_punctuate(trained["model"], stdin="")
    assert empty.returncode == 0 and empty.stdout == ""
    missing = run_punctuate(trained["model"], str(tmp_path / "nope.txt"))
    assert missing.returncode == 2 and "nope.txt" in missing.stderr
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"hello\nworld \xff\xfe there")
    bad = run_punctuate(trained["model"], str(binary))
    assert bad.returncode == 2 and "binary.txt:2" in bad.stderr and "UTF-8" in bad.stderr
    no_model = run_punctuate(tmp_path, stdin="hello")
    assert no_model.returncode == 2 and "config.json" in no_model.stderr


def test_long_input_gives_identical_labels_to_a_single_window_where_they_overlap(trained):
    from inference.punctuator import Punctuator

    punctuator = Punctuator(trained["model"])
    words = read_iwslt(trained["root"] / "prepared" / "ref.tsv").words
    labels = punctuator.predict_labels(words)
    assert len(labels) == len(words)
    assert punctuator.predict_labels([]) == []


def test_report_stage_takes_each_experiment_from_the_first_folder_that_has_it(trained, tmp_path):
    """Runs kept outside the default pipeline (e.g. ablations) are reported beside the main ones."""
    import yaml

    from pipeline.report import main as report_main

    scores = evaluate_model(trained["model"], trained["root"] / "prepared", tmp_path / "p", splits=["ref", "asr"])
    for folder, name in (("main", "base"), ("extra", "ablation")):
        for kind, payload in (("eval", scores), ("train", trained["result"].metrics)):
            path = tmp_path / f"{kind}_{folder}" / f"{name}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(payload))
        (tmp_path / f"artifacts_{folder}" / name).mkdir(parents=True)
        (tmp_path / f"artifacts_{folder}" / name / "model").symlink_to(trained["model"])
    experiment = {"model": TINY_MODEL}
    params = {"profile": "tiny", "experiments": ["base"], "report": {"example_split": "ref", "example_after_token": 0},
              "train": TINY_TRAIN, "experiment_defs": {"base": experiment, "ablation": experiment},
              "profiles": {"tiny": {}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    out = tmp_path / "reports" / "ablations.md"
    args = ["--params", str(tmp_path / "params.yaml"), "--experiments", "base", "ablation",
            "--features", str(trained["features"]), "--figures", str(tmp_path / "reports" / "ablation_figures"),
            "--title", "Ablations", "--out", str(out)]
    for folder in ("extra", "main"):
        args += ["--eval-metrics", str(tmp_path / f"eval_{folder}"), "--train-metrics", str(tmp_path / f"train_{folder}"),
                 "--artifacts", str(tmp_path / f"artifacts_{folder}")]
    assert report_main(args) == 0
    text = out.read_text()
    assert text.startswith("# Ablations (profile `tiny`)")
    assert "| base (reduced) | Ref |" in text and "| ablation (reduced) | ASR |" in text
    assert "](ablation_figures/ablation_learning_curves.png)" in text
    assert (tmp_path / "reports" / "ablation_figures" / "base_word_cancellation.png").exists()
