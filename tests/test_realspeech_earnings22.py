"""realspeech.earnings22 and its report, and stage prepare_earnings22: Earnings-22's splits written as the
repository's, real cues per token that are punctuate's own, each call's files as a user gives them, the report."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from corpus.earnings22 import Earnings22FormatError
from corpus.iwslt import read_iwslt
from realspeech.earnings22 import prepare_earnings22, untimed_runs
from tests.fixture_earnings22 import write_earnings22
from tests.fixture_real_speech import write_real_talks

TOKENS = ["good", "morning", "it", "'s", "latam", "'s", "call", "any", "questions", "yes", "we", "do", "n't", "know",
          "the", "margin", "thanks"]
PAUSES = {"seed": 15, "missing_rate": None, "dropout_fraction": 0.5, "dropout_span": 100, "min_pool": 30}


@pytest.fixture()
def prepared(tmp_path):
    return prepare_earnings22(write_earnings22(tmp_path / "earnings22"), tmp_path / "out", progress=False)


def test_the_splits_are_token_files_with_each_calls_span(prepared, tmp_path):
    out = tmp_path / "out"
    train = read_iwslt(out / "train.tsv")
    assert train.words == TOKENS + TOKENS and read_iwslt(out / "dev.tsv").words == TOKENS
    assert (out / "train_talks.tsv").read_text() == "talk\tfirst_token\ttokens\nc1\t0\t17\nc2\t17\t17\n"
    assert (out / "test_talks.tsv").read_text() == "talk\tfirst_token\ttokens\nc4\t0\t17\n"
    assert prepared.paths["train"] == out / "train.tsv"


def test_the_cues_are_the_real_pauses_with_untimed_words_missing(prepared, tmp_path):
    raw = np.load(tmp_path / "out" / "timing" / "dev" / "timing.npy")
    turn = np.load(tmp_path / "out" / "timing" / "dev" / "speaker_turn.npy")
    assert raw.dtype == np.float32 and raw.shape == (len(TOKENS), 3) and turn.shape == (len(TOKENS),)
    at = {token: index for index, token in reversed(list(enumerate(TOKENS)))}
    assert raw[at["morning"], 0] == pytest.approx(0.4) and raw[at["call"], 0] == pytest.approx(0.7)
    assert raw[at["questions"], 0] == pytest.approx(1.0) and turn[at["questions"]]  # across the speaker turn: kept
    assert raw[at["margin"], 0] == pytest.approx(1.4) and turn[at["margin"]]  # over the dropped <inaudible>
    assert raw[at["the"], [0, 2]].tolist() == [0.0, 0.0]  # "margin" starts before "the" ends: an overlap reads 0
    for token in ("yes", "we", "do", "n't", "know", "thanks"):  # untimed, before an untimed word, the last word
        assert raw[at[token], 2] == 1.0 and raw[at[token], 0] == 0.0, token
    assert raw[at["it"]].tolist() == [0.0, 0.0, 0.0] and turn.sum() == 2


def test_each_calls_files_are_what_punctuate_reads_to_the_same_cues(prepared, tmp_path):
    from corpus.user_text import model_tokens, split_user_text
    from inference.speech_input import match_timings, read_timing_rows, timing_raw

    calls = tmp_path / "out" / "calls" / "test"
    text = (calls / "text" / "c4.txt").read_text()
    assert text == "good morning it's latam's call any questions\nyes we don't know the margin\nthanks\n"
    assert (calls / "timings" / "c4.tsv").read_text().splitlines()[:2] == ["word\tstart\tend", "good\t30.080\t30.400"]
    assert "we\t\t" in (calls / "timings" / "c4.tsv").read_text().splitlines()
    user_text = split_user_text(text)
    starts, ends = match_timings(user_text, read_timing_rows(calls / "timings" / "c4.tsv"))
    assert model_tokens(user_text) == TOKENS
    assert np.array_equal(timing_raw(user_text, starts, ends).astype(np.float32),
                          np.load(tmp_path / "out" / "timing" / "test" / "timing.npy"))
    reference = read_iwslt(calls / "ref" / "c4.tsv")
    assert reference.words == [word.text for word in user_text.words]
    assert reference.labels[-3:] == ["O", "PERIOD", "PERIOD"]


def test_the_report_counts_the_splits_stretches_and_turns(prepared):
    train = prepared.report["splits"]["train"]
    assert (train["calls"], train["words"], train["spoken_words"], train["tokens"]) == (2, 30, 28, 34)
    assert train["timed_share"] == pytest.approx(24 / 30) and train["annotations_dropped"] == 2
    assert train["marks"] == {"COMMA": 4, "PERIOD": 6, "QUESTION": 2}
    assert train["untimed_runs"]["runs"] == 2 and train["untimed_runs"]["median_length"] == 3.0
    assert train["speaker_turns"]["turns"] == 4 and train["speaker_turns"]["share_pause_0.2s"] == 1.0
    assert train["cues"]["PERIOD"]["words"] == 6 and train["case"] == {"CA": 2, "LC": 18, "N/A": 2, "UC": 8}
    assert untimed_runs(np.array([True, False, False, True, False])).tolist() == [2, 1]


def test_a_call_that_splits_tsv_names_without_its_file_is_named(tmp_path):
    data = write_earnings22(tmp_path / "earnings22")
    (data / "aligned" / "c3.aligned.nlp").unlink()
    with pytest.raises(Earnings22FormatError, match=r"splits\.tsv:4: call 'c3' has no file"):
        prepare_earnings22(data, tmp_path / "out", progress=False)


def test_the_stage_writes_the_splits_the_report_its_figure_and_metrics(tmp_path):
    from pipeline.prepare_earnings22 import main

    data = write_earnings22(tmp_path / "earnings22")
    talks = write_real_talks(tmp_path / "ted_real")
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({
        "profile": "small", "profiles": {"small": {"data": {}, "train": {}, "experiments": {}}},
        "experiment_defs": {}, "train": {}, "pauses": PAUSES,
        "data": {"earnings22_dir": str(data), "real_speech_dir": str(tmp_path / "ted_real"),
                 "real_speech_talks": talks}}))
    out, report, figures = tmp_path / "e22", tmp_path / "reports" / "e22.md", tmp_path / "reports" / "e22_figures"
    assert main(["--params", str(params), "--out", str(out), "--metrics", str(tmp_path / "m.json"), "--report",
                 str(report), "--figures", str(figures), "--quiet"]) == 0
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert set(metrics["sources"]) == {"earnings22_train", "earnings22_dev", "earnings22_test", "ted_real",
                                       "simulated"}
    assert metrics["sources"]["ted_real"]["PERIOD"]["share_pause_0.2s"] > metrics["sources"]["ted_real"]["O"][
        "share_pause_0.2s"]
    text = report.read_text()
    assert "test (for reporting only)" in text and "CC BY-SA 4.0" in text and "Rev.com" in text
    assert "![cues per label](e22_figures/cues_by_label.png)" in text and (figures / "cues_by_label.png").is_file()
    assert read_iwslt(out / "test.tsv").words == TOKENS


def test_the_speech_mix_joins_teds_simulated_cues_and_the_calls_real_ones(prepared, tmp_path):
    """pauses.mix: TED's tokens and cues, then Earnings-22 train's; the control's real cues are the same values
    shuffled across the timed words, the missing ones where they were."""
    from embeddings.speech_sources import PAUSES_FILE
    from embeddings.timing_features import word_groups
    from realspeech.speech_mix import shuffled_cues, write_speech_mix

    out = tmp_path / "out"
    ted = tmp_path / "ted"
    ted_words = ["so", "we", "do", "n't", "know", "."][:5] * 4
    ted_labels = ["O", "O", "O", "O", "PERIOD"] * 4
    from corpus.iwslt import write_iwslt

    for split in ("train", "dev", "ref", "asr"):
        write_iwslt(ted / "prepared" / f"{split}.tsv", ted_words, ted_labels)
        for variant, value in (("timed", 0.5), ("control", 0.25)):
            path = ted / "pauses" / variant / split / PAUSES_FILE
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, np.full((len(ted_words), 3), value, dtype=np.float32) * [1, 1, 0])
    figures = write_speech_mix(ted / "prepared", ted / "pauses", out, tmp_path / "mix", seed=3)
    calls = read_iwslt(out / "train.tsv")
    mixed = read_iwslt(tmp_path / "mix" / "prepared" / "train.tsv")
    assert mixed.words == ted_words + calls.words and mixed.labels == ted_labels + calls.labels
    real = np.load(out / "timing" / "train" / PAUSES_FILE)
    timed = np.load(tmp_path / "mix" / "timed" / "train" / PAUSES_FILE)
    control = np.load(tmp_path / "mix" / "control" / "train" / PAUSES_FILE)
    assert np.array_equal(timed[len(ted_words):], real) and (timed[:len(ted_words), 0] == 0.5).all()
    assert (control[:len(ted_words), 0] == 0.25).all()
    ours = control[len(ted_words):]
    assert np.array_equal(ours[:, 2], real[:, 2])  # missing cues stay where they are
    carriers = word_groups(calls.words) & (real[:, 2] == 0)
    assert sorted(map(tuple, ours[carriers, :2])) == sorted(map(tuple, real[carriers, :2]))  # the same values...
    assert not np.array_equal(ours, real)  # ... elsewhere
    assert np.array_equal(shuffled_cues(calls.words, real, seed=3), shuffled_cues(calls.words, real, seed=3))
    assert figures["train_tokens"] == len(mixed.words) and [p["source"] for p in figures["parts"]] == [
        "ted train (simulated cues)", "earnings22 train (real cues)"]
    assert read_iwslt(tmp_path / "mix" / "prepared" / "dev.tsv").words == ted_words  # IWSLT2011's, as prepared
    with pytest.raises(ValueError, match="TED's text, Earnings-22's, or both"):
        write_speech_mix(ted / "prepared", ted / "pauses", out, tmp_path / "none", ted=False, earnings22_splits=[])
    # TED's tokens without cues: every one flagged missing in both folders; the calls' cues as before
    write_speech_mix(ted / "prepared", ted / "pauses", out, tmp_path / "real_only", seed=3, ted_cues="missing")
    for variant, expected in (("timed", timed), ("control", control)):
        cues = np.load(tmp_path / "real_only" / variant / "train" / PAUSES_FILE)
        assert (cues[:len(ted_words), 2] == 1).all() and not cues[:len(ted_words), :2].any()
        assert np.array_equal(cues[len(ted_words):], expected[len(ted_words):])
    with pytest.raises(ValueError, match="ted_cues must be one of"):
        write_speech_mix(ted / "prepared", ted / "pauses", out, tmp_path / "bad", ted_cues="none")


def test_a_prepared_call_reads_as_a_real_talk(prepared, tmp_path):
    from realspeech.earnings22 import prepared_calls, read_prepared_call, timed_share

    calls = tmp_path / "out" / "calls" / "test"
    assert prepared_calls(calls) == ["c4"]
    talk = read_prepared_call(calls, "c4")
    assert talk.words[:2] == ("good", "morning") and talk.labels[1] == "COMMA"
    assert 0.5 < timed_share(calls, ["c4"]) < 1.0  # the untimed stretch


def test_calls_fall_into_groups_by_their_timed_share(prepared, tmp_path):
    from realspeech.earnings22 import prepared_calls, timed_call_groups

    calls = tmp_path / "out" / "calls" / "test"
    assert timed_call_groups(calls, ["c4"]) == {"calls timed ≥ 50 %": ["c4"], "calls timed < 50 %": []}
    for folder in ("text", "ref"):  # a copy of c4 whose aligner gave up after its first three words
        (calls / folder / "c5.tsv" if folder == "ref" else calls / folder / "c5.txt").write_bytes(
            (calls / folder / ("c4.tsv" if folder == "ref" else "c4.txt")).read_bytes())
    rows = (calls / "timings" / "c4.tsv").read_text().splitlines()
    untimed = [row.split("\t")[0] + "\t\t" for row in rows[4:]]
    (calls / "timings" / "c5.tsv").write_text("\n".join(rows[:4] + untimed) + "\n")
    assert prepared_calls(calls) == ["c4", "c5"]
    assert timed_call_groups(calls, ["c4", "c5"]) == {"calls timed ≥ 50 %": ["c4"], "calls timed < 50 %": ["c5"]}
    with pytest.raises(FileNotFoundError, match="no prepared calls"):
        prepared_calls(tmp_path)
