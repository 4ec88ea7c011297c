"""scripts/earnings22_turn_bound.py: the turn ends of prepared calls, and F1 with the gold label at each of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixture_earnings22 import write_earnings22
from tests.helpers import load_script

turn_bound = load_script("earnings22_turn_bound")
REPO = Path(__file__).resolve().parents[1]


def test_the_bound_puts_the_gold_label_on_turn_ends_only():
    labels = ["O", "PERIOD", "O", "COMMA", "O", "QUESTION"]
    predicted = ["O", "O", "O", "COMMA", "PERIOD", "O"]
    turn = [False, True, False, False, False, True]
    figures = turn_bound.turn_bound(labels, predicted, turn)
    assert figures["right_at_turn_ends"] == 0
    # as predicted: 1 right of 2 predicted marks, 3 gold: F1 40; turn ends gold: 3 right of 4 predicted: F1 85.7
    assert figures["f1"] == pytest.approx(40.0) and figures["f1_turn_ends_gold"] == pytest.approx(85.71)
    assert figures["bound"] == pytest.approx(45.71)
    with pytest.raises(ValueError, match="5 predicted labels for 6 tokens"):
        turn_bound.turn_bound(labels, predicted[:5], turn)


def test_turn_ends_come_from_the_calls_and_the_report_names_each_model(tmp_path):
    from realspeech.earnings22 import prepare_earnings22

    data = write_earnings22(tmp_path / "earnings22")
    prepare_earnings22(data, tmp_path / "prepared")
    split = tmp_path / "prepared"
    talks, turn = turn_bound.turn_ends(data, split / "dev.tsv", split / "dev_talks.tsv")
    words = [word for talk in talks for word in talk.words]
    labels = [label for talk in talks for label in talk.labels]
    assert [talk.talk_id for talk in talks] == ["c3"] and len(turn) == len(words)
    # the dev call's turns: after "questions" (speaker 0 to 1) and after "margin" (1 to 0; the annotation's period)
    ends = [(words[i], labels[i]) for i in range(len(words)) if turn[i]]
    assert ends == [("questions", "QUESTION"), ("margin", "PERIOD")]
    predictions = tmp_path / "pred.tsv"
    predictions.write_text("".join(f"{w}\tO\n" for w in words), encoding="utf-8")
    assert turn_bound.main(["--models", f"nothing={predictions}", "--calls", str(data),
                            "--earnings22", str(split), "--out", str(tmp_path / "bound"),
                            "--params", str(REPO / "params.yaml")]) == 0
    figures = json.loads((tmp_path / "bound.json").read_text(encoding="utf-8"))
    assert figures["models"]["nothing"]["f1"] == 0 and figures["turn_ends"] == int(turn.sum())
    assert "| nothing | 0.00 |" in (tmp_path / "bound.md").read_text(encoding="utf-8")
    predictions.write_text("word\tO\n", encoding="utf-8")
    with pytest.raises(ValueError, match="its words are not the split's"):
        turn_bound.read_predictions(predictions, words)
