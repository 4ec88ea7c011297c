"""scripts/ted_cross_fitted.py: a fold's params read its own pause model's cues, and the TED-only tuning."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers import load_script

cross_fitted = load_script("ted_cross_fitted")
REPO = Path(__file__).resolve().parents[1]


def test_a_fold_reads_its_own_pause_model_and_nothing_else_moves():
    raw = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    fold = cross_fitted.fold_params(raw, "runs/x/without_A/pauses", ["minilm_word_pauses_mix", "minilm_word_pauses"])
    sets = fold["embed"]["feature_sets"]
    assert sets["word_pauses_mix"]["prepared"] == "runs/x/without_A/pauses/mix/prepared"
    assert sets["word_pauses_mix"]["speech_source"]["path"] == "runs/x/without_A/pauses/mix/timed"
    assert sets["word_pauses"]["speech_source"]["path"] == "runs/x/without_A/pauses/timed"
    # no path of the fold's feature sets is left under data/pauses, and only those paths changed
    assert "data/pauses" not in yaml.safe_dump(sets)
    assert {k: v for k, v in fold.items() if k not in ("embed", "tunings")} == \
        {k: v for k, v in raw.items() if k not in ("embed", "tunings")}
    assert {k: v for k, v in fold["embed"].items() if k != "feature_sets"} == \
        {k: v for k, v in raw["embed"].items() if k != "feature_sets"}
    assert cross_fitted.with_pauses_dir(["data/pauses", "data/pausesX", 3], "w") == ["w", "data/pausesX", 3]
    # the TED-only speech model: the mix's tuning on TED's cues alone, as b883b5d's punctuate.audio_model was
    ted_only = fold["tunings"]["minilm_word_pauses"]
    assert ted_only == {**raw["tunings"]["minilm_word_pauses_mix"], "features": "word_pauses"}
    assert "minilm_word_pauses" not in raw["tunings"]  # the params read are not changed
    with pytest.raises(SystemExit, match="nope: not tunings"):
        cross_fitted.fold_params(raw, "w", ["nope"])
