import pytest

from punctuation.reporting import example_window, load_published, published_figures, results_markdown


def scores(f1):
    cls = {"precision": f1, "recall": f1, "f1": f1}
    return {"COMMA": cls, "PERIOD": cls, "QUESTION": cls, "OVERALL": cls, "SER": 1 - f1, "tokens": 10}


def test_results_table_puts_published_figures_beside_ours():
    experiments = {"transformer": {"eval": {"ref": scores(0.5), "asr": scores(0.4)},
                                   "train": {"best_dev_f1": 0.55, "steps": 10}, "published": "yi_tao_2019/word"}}
    text = results_markdown("small", experiments, load_published())
    assert "reduced CPU profile" in text
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
