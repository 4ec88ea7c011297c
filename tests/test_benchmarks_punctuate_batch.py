"""benchmarks/punctuate_batch.py on a tiny model and corpus: every figure of real ``punctuate`` processes is
reported beside its target, and the two batch runs write the same bytes."""

from __future__ import annotations

import json

import pytest

from benchmarks.punctuate_batch import main, verdict, write_corpus
from tests.helpers import write_word2vec_text
from tests.test_inference_model_dir import VECTORS, make_model_dir


@pytest.mark.slow
def test_reports_batch_single_calls_and_a_large_file(tmp_path, capsys):
    model = make_model_dir(tmp_path, write_word2vec_text(tmp_path / "vectors.txt", VECTORS))
    out = tmp_path / "batch.json"
    assert main(["--model", str(model), "--transcripts", "4", "--words", "30", "--single-calls", "2",
                 "--large-words", "200", "--text", str(tmp_path / "none.tsv"), "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["words"] == 120 and figures["same_outputs"] is True
    assert set(figures["runs"]) == {"one_process", "workers_2"}
    for run in figures["runs"].values():
        assert run["words_per_s"] > 0 and run["peak_pss_mb"] > 50 and run["vs_single_calls"] > 0
    assert figures["single_calls"]["sampled"] == 2 and figures["large_file"]["words"] == 200
    printed = capsys.readouterr().out
    assert "extrapolated from the sample" in printed and "vs_single_calls >= 10.0" in printed


def test_each_target_is_met_or_missed():
    assert verdict({"vs_large_file": 0.9, "vs_single_calls": 12.0, "peak_pss_mb": 1200}).count("met") == 3
    missed = verdict({"vs_large_file": 0.7, "vs_single_calls": 9.0, "peak_pss_mb": 1600})
    assert missed.count("MISSED") == 3 and " met" not in missed


def test_the_corpus_has_the_asked_transcripts_and_words(tmp_path):
    assert write_corpus(tmp_path / "c", 3, 45, None) == 135
    texts = sorted((tmp_path / "c").glob("*.txt"))
    assert [len(path.read_text().split()) for path in texts] == [45, 45, 45]
    assert texts[0].read_text().count("\n") == 3  # 20 words a line
