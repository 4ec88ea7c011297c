"""pipeline.speech2vec --score-only: vectors already trained are scored again without training."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline import speech2vec as stage

REPO = Path(__file__).resolve().parents[1]
PARAMS = {"profile": "tiny", "profiles": {"tiny": {"train": {}, "experiments": {}}},
          "speech2vec": {"dim": 4}, "embed": {"word_source": {"type": "none"}}}


def write_trained_vectors(out_dir, words, vectors):
    out_dir.mkdir(parents=True)
    lines = [f"{len(words)} {vectors.shape[1]}"]
    lines += [w + " " + " ".join(f"{x:.6f}" for x in v) for w, v in zip(words, vectors)]
    (out_dir / "vectors.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    summary = {"format": 1, "config": {"min_count": 3, "train_splits": ["train"], "dim": vectors.shape[1]},
               "training_segments": 1234, "training_words": len(words), "vocabulary": len(words),
               "epoch_losses": [0.9, 0.8], "occurrences": {"train": {"tokens": 100, "tokens_with_vector": 60}}}
    (out_dir / "speech2vec.json").write_text(json.dumps(summary), encoding="utf-8")


def test_score_only_reports_the_existing_vectors_without_training(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    words = ["write", "right", "two", "too", "tiger", "cat", "money", "bank", "car", "automobile"]
    vectors = rng.normal(size=(len(words), 4)).astype(np.float32)
    vectors[1] = vectors[0] + 0.01  # write/right: the same sound, so (nearly) the same vector
    write_trained_vectors(tmp_path / "s2v", words, vectors)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(PARAMS))
    monkeypatch.setattr(stage, "train_speech2vec", lambda *a, **k: pytest.fail("--score-only must not train"))

    metrics, report = tmp_path / "m.json", tmp_path / "r.md"
    assert stage.main(["--params", str(params), "--out", str(tmp_path / "s2v"), "--metrics", str(metrics),
                       "--report", str(report), "--score-only"]) == 0
    scored = json.loads(metrics.read_text())
    assert scored["training_segments"] == 1234  # from the stored summary
    assert not any("seconds" in key for key in scored)  # wall times never reach a file DVC hashes
    homophones = scored["homophones"]["speech2vec"]
    assert homophones["covered_pairs"] == 2 and homophones["median_rank"] <= 2  # write/right nearest neighbours
    assert set(scored["word_similarity"]["sources"]) == {"speech2vec"}
    assert "1,234 word segments" in report.read_text()


def test_score_only_without_trained_vectors_says_what_is_missing(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(PARAMS))
    with pytest.raises(SystemExit, match="speech2vec.json not found"):
        stage.main(["--params", str(params), "--out", str(tmp_path / "none"), "--score-only"])


def test_the_report_gives_the_coverage_of_the_paper_runs_speech2vec(tmp_path):
    words = ["write", "right", "two", "too"]
    write_trained_vectors(tmp_path / "s2v", words, np.eye(4, dtype=np.float32))
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(PARAMS))
    coverage = json.loads((REPO / "reports/paper_speech2vec/coverage.json").read_text(encoding="utf-8"))
    coverage["share_of_training_tokens_with_vector"] = 0.9123
    coverage["selection"]["types_targeted"] = 7777
    (tmp_path / "coverage.json").write_text(json.dumps(coverage), encoding="utf-8")

    report = tmp_path / "r.md"
    assert stage.main(["--params", str(params), "--out", str(tmp_path / "s2v"), "--metrics", str(tmp_path / "m.json"),
                       "--report", str(report), "--score-only",
                       "--paper-coverage", str(tmp_path / "coverage.json")]) == 0
    text = report.read_text()
    section = text[text.index("## The paper runs' Speech2Vec"):]
    assert "**91.2 %**" in section and "| 7,777 |" in section
    assert "knows 4 types" in section  # the default pipeline's vectors, for comparison
