"""scripts/earnings22_cues_by_timed_share.py: a comparison's finished results pooled within the timed calls and the
mostly untimed ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from comparisons.bootstrap import split_talks, talk_confusions, talks_sha256
from comparisons.spec import load_spec
from corpus.iwslt import write_iwslt
from tests.helpers import load_script

by_timed_share = load_script("earnings22_cues_by_timed_share")

WORDS = ["so", "revenue", "grew", "this", "quarter", "and", "margins", "held", "any", "questions", "yes", "thanks"]
LABELS = ["COMMA", "O", "O", "O", "PERIOD", "O", "O", "PERIOD", "O", "QUESTION", "COMMA", "PERIOD"]
#: each arm's labels: B gets the timed call (c1, tokens 0-5) right and misses two marks of c2; A misses in c1
PREDICTED = {"A": ["O", "O", "O", "O", "COMMA", "O"] + LABELS[6:],
             "B": LABELS[:6] + ["O", "O", "O", "O", "COMMA", "PERIOD"]}


def write_comparison(root: Path) -> Path:
    write_iwslt(root / "dev.tsv", WORDS, LABELS)
    (root / "dev_talks.tsv").write_text("talk\tfirst_token\ttokens\nc1\t0\t6\nc2\t6\t6\n", encoding="utf-8")
    timings = root / "calls" / "timings"
    timings.mkdir(parents=True)
    (timings / "c1.tsv").write_text("".join(f"{w}\t{i:.1f}\t{i + 0.5:.1f}\n" for i, w in enumerate(WORDS[:6])))
    (timings / "c2.tsv").write_text(f"{WORDS[6]}\t0.0\t0.4\n" + "".join(f"{w}\t\t\n" for w in WORDS[7:]))
    spec = {"question": "Do cues help?", "params": "params.yaml", "prepared": str(root),
            "arms": {"A": {"what": "control", "train": [{"tuning": "t"}]}, "B": {"what": "speech",
                                                                                "train": [{"tuning": "t"}]}},
            "seeds": [1], "decide_on": ["calls_dev"], "bootstrap": {"resamples": 200, "seed": 3},
            "splits": {"calls_dev": {"file": str(root / "dev.tsv"), "talks": str(root / "dev_talks.tsv")}},
            "keep_rule": {"min_effect": 3.0, "interval_above_zero": True, "every_seed": True,
                         "max_extra_minutes": None}}
    path = root / "specs" / "cues.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    loaded = load_spec(path)
    talks = split_talks(root / "dev.tsv", talks_tsv=root / "dev_talks.tsv", pseudo_talk_tokens=0)
    for arm, predicted in PREDICTED.items():
        result = {"arm": arm, "seed": 1, "rule_sha256": loaded.rule_sha256, "spec_sha256": loaded.sha256,
                  "scores": {"calls_dev": {"talks": {"sha256": talks_sha256(talks),
                                                     "confusions": talk_confusions(LABELS, predicted, talks)}}}}
        out = root / "results" / "cues" / f"{arm}_seed1.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result), encoding="utf-8")
    return path


def test_the_gain_is_pooled_within_the_timed_calls_and_the_untimed_ones(tmp_path):
    spec = write_comparison(tmp_path)
    figures = by_timed_share.cues_by_timed_share([spec], "calls_dev", tmp_path / "calls", tmp_path / "results")
    groups = figures["comparisons"]["cues"]["groups"]
    timed, untimed = groups["calls timed ≥ 50 %"], groups["calls timed < 50 %"]
    assert (timed["talks"], timed["tokens"], untimed["talks"], untimed["tokens"]) == (1, 6, 1, 6)
    # c1: A finds no mark of 2 (and one wrong): F1 0; B all 2: 100. c2: A all 4: 100; B 2 right of 2 predicted, 4
    # gold: 2 * 2 / 6 = 66.7
    assert timed["f1"] == {"A": [0.0], "B": [100.0]} and timed["mean_gain"] == pytest.approx(100.0)
    assert untimed["f1"]["B"] == [pytest.approx(66.667)] and untimed["mean_gain"] == pytest.approx(-33.333)
    text = by_timed_share.markdown(figures)
    assert "| comparison | calls timed ≥ 50 % (1 calls, 6 tokens) | calls timed < 50 % (1 calls, 6 tokens) |" in text
    assert "| [cues](comparisons/cues.md) | +100.00 (" in text


def test_a_split_without_named_talks_is_refused(tmp_path):
    spec = write_comparison(tmp_path)
    with pytest.raises(ValueError, match="split 'dev' has no talks file"):
        by_timed_share.cues_by_timed_share([spec], "dev", tmp_path / "calls", tmp_path / "results")
