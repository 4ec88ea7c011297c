"""benchmarks/punctuate_speed.py on a tiny model: every figure of a real `punctuate` process is reported."""

from __future__ import annotations

import json

from benchmarks.punctuate_speed import benchmark_text, main
from tests.helpers import write_word2vec_text
from tests.test_inference_model_dir import VECTORS, make_model_dir


def test_reports_start_up_throughput_and_peak_memory(tmp_path, capsys):
    model = make_model_dir(tmp_path, write_word2vec_text(tmp_path / "vectors.txt", VECTORS))
    out = tmp_path / "speed.json"
    assert main(["--model", str(model), "--words", "300", "--repeats", "1", "--text", str(tmp_path / "none.tsv"),
                 "--json", str(out)]) == 0
    [figures] = json.loads(out.read_text())
    assert figures["words"] == 300 and figures["words_per_s"] > 0 and figures["peak_rss_mb"] > 50
    assert figures["start_s"] > 0 and figures["start_vs_torch"] > 0.5
    printed = capsys.readouterr().out
    assert "words/s" in printed and "words_per_s >= 2,000" in printed  # each figure beside its target


def test_each_target_is_met_or_missed():
    from benchmarks.punctuate_speed import verdict

    assert verdict({"words_per_s": 2500, "peak_rss_mb": 900, "start_vs_torch": 2.0}).count("met") == 3
    missed = verdict({"words_per_s": 1999, "peak_rss_mb": 1600, "start_vs_torch": 2.6})
    assert missed.count("MISSED") == 3 and "met" not in missed


def test_the_benchmark_text_has_the_asked_number_of_words(tmp_path):
    split = tmp_path / "dev.tsv"
    split.write_text("so\tO\ni\tO\ndo\tO\nn't\tPERIOD\n", encoding="utf-8")
    text = benchmark_text(45, split)
    assert len(text.split()) == 45 and text.split()[:4] == ["so", "i", "do", "n't"]
    assert len(benchmark_text(10, None).split()) == 10
