"""Speech2Vec covering the training vocabulary (audio/coverage.py, ``python -m paper_runs speech2vec``): the
greedy choice of sentences on a hand-made stream (every reachable targeted type min_count times, deterministic, the
figures), and, slow, the whole build on the tiny TED fixture (flite, pocketsphinx, librosa): vectors for the covered
types, and a second call that skips every finished step."""

from __future__ import annotations

import json

import pytest

from audio.coverage import COVERAGE_FILE, STEPS, covering_sentences, sentence_spans

# five sentences (PERIOD after each), 17 tokens: a 4, b 3, d 2, every other type once
SENTENCES = [["a", "b", "c"], ["a", "a", "d"], ["b", "d", "e"], ["a", "b"], ["f", "g", "h", "i", "j", "k"]]
WORDS = [word for sentence in SENTENCES for word in sentence]
LABELS = [label for sentence in SENTENCES for label in ["O"] * (len(sentence) - 1) + ["PERIOD"]]


def test_sentences_end_at_periods_and_questions_and_at_the_cap():
    assert sentence_spans(LABELS) == [(0, 3), (3, 3), (6, 3), (9, 2), (11, 6)]
    assert sentence_spans(LABELS, max_sentence_tokens=4) == [(0, 3), (3, 3), (6, 3), (9, 2), (11, 4), (15, 2)]
    assert sentence_spans(["O", "QUESTION", "O"]) == [(0, 2), (2, 1)]


def test_the_chosen_sentences_hold_each_targeted_type_min_count_times():
    selection = covering_sentences(WORDS, LABELS, coverage=0.6, min_count=2)
    # targeted by frequency (ties alphabetical): a, b, d, c, e = 11 of 17 tokens >= 60 %; c and e occur once only
    assert selection.targeted == ["a", "b", "d", "c", "e"]
    # greedy by still-needed occurrences per token: s1 (3/3, before s3 by index), then s2 (2/3), then s3 (1/2)
    assert selection.sentences == [(3, 3), (6, 3), (9, 2)]
    chosen = [w for first, size in selection.sentences for w in WORDS[first:first + size]]
    assert all(chosen.count(word) >= 2 for word in ("a", "b", "d"))
    report = selection.report
    assert report["training_tokens"] == 17 and report["training_types"] == 11 and report["training_sentences"] == 5
    assert report["types_targeted"] == 5 and report["share_of_tokens_targeted"] == round(11 / 17, 4)
    assert report["types_unreachable"] == 2 and report["types_covered"] == 3
    assert report["share_of_tokens_covered"] == round(9 / 17, 4)
    assert report["chosen_sentences"] == 3 and report["chosen_tokens"] == 8 and report["budget_reached"] is False
    assert covering_sentences(WORDS, LABELS, coverage=0.6, min_count=2) == selection  # deterministic


def test_the_token_budget_ends_the_selection_and_says_so():
    selection = covering_sentences(WORDS, LABELS, coverage=0.6, min_count=2, max_tokens=5)
    assert selection.sentences == [(3, 3)]
    assert selection.report["budget_reached"] is True and selection.report["types_covered"] == 1  # a only


def test_min_count_one_covers_every_targeted_type_at_full_coverage():
    selection = covering_sentences(WORDS, LABELS, coverage=1.0, min_count=1)
    assert selection.report["types_covered"] == selection.report["types_targeted"] == 11
    assert selection.report["share_of_tokens_covered"] == 1.0 and selection.report["types_unreachable"] == 0


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="coverage"):
        covering_sentences(WORDS, LABELS, coverage=0.0, min_count=2)
    with pytest.raises(ValueError, match="labels"):
        covering_sentences(WORDS, LABELS[:-1], coverage=0.5, min_count=2)


def test_the_kit_reads_the_paper_speech2vec_where_params_name_it():
    from paper_runs.processes import BUILT_BY, kit_feature_set

    speech = {"type": "speech2vec", "path": "data/speech2vec"}
    params = {"embed": {"feature_sets": {"speech": {"word_source": {"type": "none"}, "speech_source": speech},
                                         "word_acoustic": {"speech_source": {"type": "acoustic", "path": "x"}},
                                         "word": {}}},
              "gpu_kit": {"speech2vec_dir": "data/paper_speech2vec/speech2vec"}}
    entry, paper = kit_feature_set(params, "speech")
    assert paper and entry["speech_source"] == {"type": "speech2vec", "path": "data/paper_speech2vec/speech2vec"}
    assert entry["word_source"] == {"type": "none"} and speech["path"] == "data/speech2vec"  # params untouched
    assert kit_feature_set(params, "word_acoustic")[1] is False and kit_feature_set(params, "word") == ({}, False)
    assert kit_feature_set(params, "nothing") == (None, False)
    assert kit_feature_set({**params, "gpu_kit": {"speech2vec_dir": None}}, "speech") == (
        params["embed"]["feature_sets"]["speech"], False)
    assert BUILT_BY["paper-speech2vec"].startswith("python -m paper_runs speech2vec")


@pytest.mark.slow
def test_the_build_learns_vectors_for_the_covered_types_and_resumes(tmp_path):
    pytest.importorskip("soundfile", reason="soundfile is not installed")
    pytest.importorskip("librosa", reason="librosa is not installed")
    pytest.importorskip("pocketsphinx", reason="pocketsphinx is not installed")
    from audio.reference_speech import flite_available

    if not flite_available():
        pytest.skip("flite is not installed (apt-get install flite)")
    from audio.coverage import build_coverage_speech2vec
    from corpus.iwslt import read_iwslt
    from tests.fixture_tedlium import SOURCES, write_prepared

    prepared = write_prepared(tmp_path / "prepared", tmp_path / "iwslt")
    params = {
        "audio": {"text": "punctuated", "voices": ["flite:kal16"], "rate_range": [1.0, 1.0],
                  "pitch_range": [1.0, 1.0], "seed": 1, "max_chunk_tokens": 80, "talk_sources": SOURCES},
        "align": {"backend": "pocketsphinx", "config": {}},
        "features": {"config": {}},
        "speech2vec": {"dim": 6, "encoder_hidden": 8, "decoder_hidden": 8, "window": 2, "min_count": 2,
                       "subsample": 0.0, "max_frames": 10, "epochs": 1, "batch_size": 16, "lr": 0.01, "threads": 1},
    }
    work = tmp_path / "paper_speech2vec"
    build = dict(params=params, workers=1, coverage=0.5, talk_tokens=30)
    summary = build_coverage_speech2vec(prepared, tmp_path / "iwslt", work, **build)
    assert summary["failed"] == [] and summary["steps_run"] == list(STEPS) and summary["steps_skipped"] == []
    selection = summary["selection"]
    assert selection["types_covered"] > 0 and selection["chosen_tokens"] < selection["training_tokens"]
    chosen = read_iwslt(work / "prepared" / "train.tsv").words
    assert len(chosen) == selection["chosen_tokens"] and summary["pseudo_talks"] >= 2

    vectors = work / "speech2vec" / "vectors.txt"
    vocabulary = {line.split(" ", 1)[0] for line in vectors.read_text(encoding="utf-8").splitlines()[1:]}
    training = read_iwslt(prepared / "train.tsv").words
    covered = {w for w in set(training) if chosen.count(w) >= 2}
    # a word whose audio the aligner could not time has no segment: nearly every covered type has a vector
    assert len(vocabulary & covered) >= 0.9 * len(covered) and vocabulary <= covered
    assert summary["vocabulary"] == len(vocabulary)
    assert summary["share_of_training_tokens_with_vector"] == round(
        sum(training.count(w) for w in vocabulary) / len(training), 4)
    assert json.loads((work / COVERAGE_FILE).read_text())["vocabulary"] == len(vocabulary)

    before = vectors.read_bytes()
    again = build_coverage_speech2vec(prepared, tmp_path / "iwslt", work, **build)
    assert again["steps_skipped"] == list(STEPS) and again["steps_run"] == []
    assert vectors.read_bytes() == before and again["vocabulary"] == summary["vocabulary"]

    # another Speech2Vec setting: the audio steps stay done, Speech2Vec learns again
    changed = {**params, "speech2vec": {**params["speech2vec"], "epochs": 2}}
    third = build_coverage_speech2vec(prepared, tmp_path / "iwslt", work, **{**build, "params": changed})
    assert third["steps_skipped"] == ["synthesize", "align", "features"] and third["steps_run"] == ["speech2vec"]
