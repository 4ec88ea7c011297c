"""Word timings checked against a transcript's words (``inference.speech_input``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from corpus.timings import TimingsFormatError, WordTiming
from corpus.user_text import split_user_text
from inference.speech_input import (
    TimingRows,
    TimingsMismatchError,
    match_timings,
    read_timing_rows,
    timing_raw,
)

TEXT = "Well, I don't know.\nIt's (Laughter) fine -- really?"


def write(tmp_path, rows: list[str], header: bool = True, name: str = "words.tsv"):
    path = tmp_path / name
    path.write_text(("word\tstart\tend\n" if header else "") + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_one_row_per_word(tmp_path):
    path = write(tmp_path, ["well\t0.0\t0.3", "i\t0.5\t0.6", "don't\t0.6\t0.9", "know\t0.9\t1.3",
                            "it's\t\t", "fine\t2.0\t2.4", "really\t2.4\t2.9"])
    rows = read_timing_rows(path)
    assert rows.lines == (2, 3, 4, 5, 6, 7, 8) and rows.source == str(path)
    user_text = split_user_text(TEXT)
    starts, ends = match_timings(user_text, rows)
    assert [w.text for w in user_text.words] == ["Well", "I", "don't", "know", "It's", "(Laughter)", "fine", "really"]
    assert starts[:4].tolist() == [0.0, 0.5, 0.6, 0.9] and math.isnan(starts[4]) and math.isnan(starts[5])
    raw = timing_raw(user_text, starts, ends)
    # tokens: well i do n't know it 's fine really
    assert raw.shape == (9, 3)
    assert raw[:, 0].tolist() == pytest.approx([0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert raw[:, 2].tolist() == [0, 0, 0, 0, 1, 1, 1, 0, 1]  # know: next word untimed; really: the last word


def test_one_row_per_token_as_the_aligner_writes_them(tmp_path):
    tokens = ["well", "i", "do", "n't", "know", "it", "'s", "fine", "really"]
    times = [(0.0, 0.3), (0.5, 0.6), (0.6, 0.75), (0.75, 0.9), (0.9, 1.3), (1.8, 1.9), (1.9, 2.0), (2.0, 2.4),
             (2.4, 2.9)]
    rows = [f"{t}\t{a}\t{b}" for t, (a, b) in zip(tokens, times)]
    starts, ends = match_timings(split_user_text(TEXT), read_timing_rows(write(tmp_path, rows, header=False)))
    assert starts[2] == 0.6 and ends[2] == 0.9  # don't = do + n't
    assert starts[4] == 1.8 and ends[4] == 2.0
    raw = timing_raw(split_user_text(TEXT), starts, ends)
    assert raw[4, 0] == pytest.approx(0.5) and raw[4, 2] == 0  # the pause after "know"


def test_rows_for_words_the_model_does_not_read_are_optional(tmp_path):
    rows = ["well\t0\t0.3", "i\t0.5\t0.6", "don't\t0.6\t0.9", "know\t0.9\t1.3", "it's\t1.8\t2.0",
            "(Laughter)\t\t", "fine\t2.0\t2.4", "really\t2.4\t2.9"]
    starts, _ = match_timings(split_user_text(TEXT), read_timing_rows(write(tmp_path, rows)))
    assert starts[6] == 2.0


def test_aligner_results_without_a_file():
    user_text = split_user_text("so it goes")
    rows = TimingRows((WordTiming("so", 0.0, 0.2, True), WordTiming("it", 0.2, 0.3, False),
                       WordTiming("goes", 0.3, 0.6, True)), "talk.wav")
    starts, _ = match_timings(user_text, rows)
    assert starts[0] == 0.0 and math.isnan(starts[1])  # an unaligned word's estimate is not used
    with pytest.raises(TimingsMismatchError, match=r"talk\.wav \(word 2 of its alignment\)"):
        match_timings(split_user_text("so what goes"), rows)


@pytest.mark.parametrize("rows, message", [
    (["well\t0\t0.3", "i\t0.5\t0.6", "do\t0.6\t0.9", "know\t0.9\t1.3"],
     r"words\.tsv:4: the word 'do' does not match the transcript's word 3, \"don't\" \(talk\.txt:1\)"),
    (["well\t0\t0.3", "i\t0.5\t0.6", "don't\t0.6\t0.9", "know\t0.9\t1.3", "its\t1.8\t2.0"],
     r"words\.tsv:6: the word 'its' does not match the transcript's word 5, \"It's\" \(talk\.txt:2\)"),
    (["well\t0\t0.3", "i\t0.5\t0.6"],
     r"words\.tsv: the timings end after 2 rows, but the transcript goes on with its word 3, \"don't\" "
     r"\(talk\.txt:1\)"),
    (["well\t0\t0.3", "i\t0.5\t0.6", "don't\t0.6\t0.9", "know\t0.9\t1.3", "it's\t1.8\t2.0", "fine\t2.0\t2.4",
      "really\t2.4\t2.9", "again\t3.0\t3.2"],
     r"words\.tsv:9: the word 'again' is beyond the transcript's last word"),
])
def test_words_that_do_not_match_name_both_files(tmp_path, rows, message):
    with pytest.raises(TimingsMismatchError, match=message):
        match_timings(split_user_text(TEXT), read_timing_rows(write(tmp_path, rows)), transcript="talk.txt")


@pytest.mark.parametrize("row, message", [
    ("i\t0.2\t0.4", r"words\.tsv:3: times out of order"),
    ("i\t-0.5\t0.4", r"words\.tsv:3: start time -0\.5 is negative"),
    ("i\tsoon\t0.4", r"words\.tsv:3: start time 'soon' is not a number"),
    ("i\t0.5\t", r"words\.tsv:3: only one of start and end"),
    ("i\t0.5", r"words\.tsv:3: expected word<TAB>start<TAB>end"),
])
def test_bad_times_name_the_file_and_line(tmp_path, row, message):
    with pytest.raises(TimingsFormatError, match=message):
        read_timing_rows(write(tmp_path, ["well\t0.3\t0.4", row]))


def test_missing_file(tmp_path):
    with pytest.raises(TimingsFormatError, match="no such file"):
        read_timing_rows(tmp_path / "nope.tsv")
    with pytest.raises(TimingsFormatError, match="not a regular file"):
        read_timing_rows(tmp_path)


def test_text_without_model_tokens():
    user_text = split_user_text("(Applause)")
    starts, ends = match_timings(user_text, TimingRows((), "x"))
    assert math.isnan(starts[0])
    assert timing_raw(user_text, starts, ends).shape == (0, 3)
    assert np.asarray(timing_raw(split_user_text(""), [], [])).shape == (0, 3)


# ----------------------------------------------------------------------------- the formats ASR systems write


def test_the_format_is_told_by_the_extension_or_given(tmp_path):
    from inference.speech_input import timings_format

    assert [timings_format(name) for name in ("a.tsv", "a.CTM", "a.json", "a.words", "ctm")] == \
        ["tsv", "ctm", "json", "tsv", "tsv"]
    assert timings_format("ctm", "ctm") == "ctm"
    with pytest.raises(ValueError, match="unknown timings format 'srt'"):
        timings_format("a.srt", "srt")


def test_a_ctm_utterance_named_as_the_transcript(tmp_path):
    from inference.speech_input import ctm_source, read_timings

    path = tmp_path / "corpus.ctm"
    path.write_text("other 1 0.0 0.2 hello\n"
                    "talk 1 0.0 0.3 well\ntalk 1 0.5 0.1 i\ntalk 1 0.6 0.15 do\ntalk 1 0.75 0.15 n't\n"
                    "talk 1 0.9 0.4 know\ntalk 1 1.8 0.2 it's\ntalk 1 2.0 0.4 fine\ntalk 1 2.4 0.5 really\n",
                    encoding="utf-8")
    rows = read_timings(ctm_source(path, "talk"))
    assert rows.lines[0] == 2 and rows.where(1) == f"{path}:3"
    starts, ends = match_timings(split_user_text(TEXT), rows)
    assert starts.tolist()[:4] == [0.0, 0.5, 0.6, 0.9] and ends[2] == pytest.approx(0.9)
    with pytest.raises(TimingsFormatError, match=r"holds 2 utterances \(other, talk\), none named 'lecture'"):
        ctm_source(path, "lecture")
    single = tmp_path / "one.ctm"
    single.write_text("utt-7 A 0.0 0.2 so\n", encoding="utf-8")
    assert ctm_source(single, "anything").utterance.utterance == "utt-7"  # a file of one utterance: that one


def test_a_whisper_json_matches_the_transcript_and_names_its_entries(tmp_path):
    from inference.speech_input import TimingsSource, read_timings

    words = [(" Well,", 0.0, 0.3), (" I", 0.5, 0.6), (" don't", 0.6, 0.9), (" know.", 0.9, 1.3), (" It's", 1.8, 2.0),
             (" fine", 2.0, 2.4), (" really?", 2.4, 2.9)]
    path = tmp_path / "talk.json"
    path.write_text(json.dumps({"segments": [{"words": [{"word": w, "start": a, "end": b} for w, a, b in words]}]}),
                    encoding="utf-8")
    rows = read_timings(TimingsSource(str(path), "json"))
    starts, _ = match_timings(split_user_text(TEXT), rows)
    assert starts[6] == 2.0
    other = split_user_text("Well, I do know. It's fine, really?")
    with pytest.raises(TimingsMismatchError, match=r"talk\.json: segments\[0\]\.words\[2\]: the word \"don't\" does "
                                                   r"not match the transcript's word 3, 'do'"):
        match_timings(other, rows)
