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


# ----------------------------------------------------------------------------- what real aligners write
# Each shape is used (the cues asserted) or refused with a message naming the file and line and what to do.


def _cues(text: str, rows: list[str], tmp_path, name: str = "t.tsv"):
    """``(user_text, raw per-token cues)`` of ``text`` with the TSV ``rows`` (header first)."""
    user_text = split_user_text(text)
    return user_text, timing_raw(user_text, *match_timings(user_text, read_timing_rows(write(tmp_path, rows,
                                                                                            name=name))))


def test_a_bare_clitic_with_a_row_of_its_own_as_the_bug_report_has_it(tmp_path):
    # The report: "t.tsv:4: the word "'s" does not match the transcript's word 3, "'s"": the transcript read the
    # bare 's as the benchmark token 's, the rows read it as a quote and s.
    rows = ["the\t0.0\t0.1", "cannibalization\t0.1\t0.9", "'s\t0.9\t1.0", "kind\t1.2\t1.4", "of\t1.4\t1.5"]
    user_text, raw = _cues("the cannibalization 's kind of", rows, tmp_path)
    assert [word.text for word in user_text.words] == ["the", "cannibalization", "'s", "kind", "of"]
    # tokens: the cannibalization 's kind of; the pause after "cannibalization 's" is the pause after the 's row
    assert raw[:, 0].tolist() == pytest.approx([0.0, 0.0, 0.2, 0.0, 0.0])
    assert raw[:, 2].tolist() == [0, 0, 0, 0, 1]
    assert raw[1, 1] == 0.0  # inside one spoken word, as the "cannibalization" of "cannibalization's"
    # the same cues as the word written whole with one row over both
    _, whole = _cues("the cannibalization's kind of",
                     ["the\t0.0\t0.1", "cannibalization's\t0.1\t1.0", "kind\t1.2\t1.4", "of\t1.4\t1.5"], tmp_path)
    assert raw.tolist() == whole.tolist()


def test_a_row_of_the_transcripts_own_word_always_matches_it(tmp_path):
    # rows and transcript words are read by one tokeniser: a message can never say "'s" does not match "'s"
    text = ("'s it 's It\u2019s n't won't can't Mr. U.S. 6.8 '90s parents' e-mail \"quoted\" (Laughter) [noise] "
            "%HESITATION <unk> we 've I 'd 're 'm 'll")
    user_text = split_user_text(text)
    rows = read_timing_rows(write(tmp_path, [f"{word.text}\t{k}\t{k + 0.5}" for k, word in
                                             enumerate(user_text.words)]))
    starts, _ = match_timings(user_text, rows)
    assert [word.text for word, start in zip(user_text.words, starts) if np.isnan(start)] == ["(Laughter)"]
    assert [start for start in starts if not np.isnan(start)] == [k for k, word in enumerate(user_text.words)
                                                                   if word.tokens]


@pytest.mark.parametrize("clitic", ["'s", "'re", "n't", "'m", "'ll", "'ve", "'d", "\u2019s", "'S"])
@pytest.mark.parametrize("transcript, rows", [
    ("bare", "bare"),    # the transcript's "we 's" and a row each
    ("whole", "bare"),   # the transcript's "we's", the rows "we" and "'s"
    ("bare", "whole"),   # the transcript's "we 's", one row "we's"
])
def test_bare_clitics_in_every_mix_give_the_cues_of_one_word(tmp_path, clitic, transcript, rows):
    stem = "do" if clitic == "n't" else "we"
    words = f"so {stem} {clitic} go" if transcript == "bare" else f"so {stem}{clitic} go"
    if rows == "bare":
        timing = ["so\t0.0\t0.3", f"{stem}\t0.5\t0.7", f"{clitic}\t0.7\t0.9", "go\t1.4\t1.6"]
    else:
        timing = ["so\t0.0\t0.3", f"{stem}{clitic}\t0.5\t0.9", "go\t1.4\t1.6"]
    user_text, raw = _cues(words, timing, tmp_path)
    assert " ".join(word.text for word in user_text.words) == words  # the user's words, byte for byte
    # the spoken word spans 0.5-0.9 s whatever the mix: pause 0.2 s before it, 0.5 s after it, on its last token
    assert raw[0, 0] == pytest.approx(0.2) and raw[-2, 0] == pytest.approx(0.5)
    assert raw[1:-2, :2].tolist() == [[0.0, 0.0]] * (len(raw) - 3)  # the tokens before its last: inside a word
    assert raw[:, 2].tolist() == [0] * (len(raw) - 1) + [1]
    reference = _cues(f"so {stem}{clitic} go", ["so\t0.0\t0.3", f"{stem}{clitic}\t0.5\t0.9", "go\t1.4\t1.6"],
                      tmp_path, name="reference.tsv")[1]
    assert raw[-2, 1] == pytest.approx(reference[-2, 1])  # held as long as the whole word, for its letters


def test_a_bare_clitic_without_a_time_leaves_its_word_untimed(tmp_path):
    _, raw = _cues("so it 's fine", ["so\t0.0\t0.3", "it\t0.5\t0.7", "'s\t\t", "fine\t1.0\t1.2"], tmp_path)
    assert raw[:, 2].tolist() == [1, 1, 1, 1]  # "so": the next word's start is known, "it 's" has no end


def test_untimed_stretches_inside_a_call_are_missing_never_a_zero_pause(tmp_path):
    # Earnings-22's forced alignments leave 28 % of the words without a time, often whole stretches
    rows = ["good\t0.0\t0.3", "morning\t0.3\t0.8", "and\t\t", "welcome\t\t", "to\t\t", "the\t2.0\t2.1",
            "call\t2.1\t2.5", "today\t3.0\t3.4"]
    user_text, raw = _cues("good morning and welcome to the call today", rows, tmp_path)
    starts, _ = match_timings(user_text, read_timing_rows(write(tmp_path, rows)))
    assert np.isnan(starts[2:5]).all()
    assert raw[:, 2].tolist() == [0, 1, 1, 1, 1, 0, 0, 1]  # the stretch, the word before it, the last word
    assert raw[raw[:, 2] > 0, :2].tolist() == [[0.0, 0.0]] * 5
    assert raw[5:7, 0].tolist() == pytest.approx([0.0, 0.5])  # after the stretch the cues are back


def test_untimed_entries_of_a_json_word_list_are_missing(tmp_path):
    from inference.speech_input import TimingsSource, read_timings

    path = tmp_path / "t.json"
    path.write_text(json.dumps({"segments": [{"words": [
        {"word": " It", "start": 0.0, "end": 0.2}, {"word": " was", "start": 0.2, "end": 0.5},
        {"word": " 1999,", "start": None, "end": None}, {"word": " right?", "start": 1.9, "end": 2.2}]}]}))
    user_text = split_user_text("It was 1999, right?")
    raw = timing_raw(user_text, *match_timings(user_text, read_timings(TimingsSource(str(path), "json"))))
    assert raw[:, 2].tolist() == [0, 1, 1, 1]


def test_touching_and_overlapping_words_are_no_pause(tmp_path):
    rows = ["so\t0.0\t0.3", "we\t0.3\t0.5", "grew\t0.45\t0.9", "fast\t0.6\t0.8", "then\t1.2\t1.4"]
    _, raw = _cues("so we grew fast then", rows, tmp_path)  # touching; overlapping; a word inside the word before
    assert raw[:, 0].tolist() == pytest.approx([0.0, 0.0, 0.0, 0.4, 0.0])
    assert raw[:, 2].tolist() == [0, 0, 0, 0, 1]  # a pause of 0, not a missing one


def test_a_long_silence_at_a_speaker_turn_is_used_and_clipped_when_encoded(tmp_path):
    from embeddings.timing_features import PAUSE_CLIP_S, PAUSE_UNIT_S, encode

    rows = ["questions\t10.0\t10.6", "thank\t40.6\t40.8", "you\t40.8\t41.0"]  # 30 s of hold music
    _, raw = _cues("questions thank you", rows, tmp_path)
    assert raw[0, 0] == pytest.approx(30.0) and raw[0, 2] == 0
    assert encode(raw, ["pause"])[0, 0] == pytest.approx(np.log1p(PAUSE_CLIP_S / PAUSE_UNIT_S))


@pytest.mark.parametrize("extra", ["[noise]", "<sil>", "{breath}", "%HESITATION", "%hesitation", "uh", "um",
                                   "sil", "[laughter]", "(Laughter)", "-"])
def test_recogniser_markup_and_fillers_the_transcript_lacks_are_skipped(tmp_path, extra):
    rows = [f"{extra}\t0.0\t0.2", "so\t0.2\t0.5", f"{extra}\t0.6\t0.9", "we\t1.0\t1.2", "grew\t1.2\t1.5",
            f"{extra}\t1.6\t1.7"]
    user_text, raw = _cues("so we grew", rows, tmp_path)
    assert raw[:, 0].tolist() == pytest.approx([0.5, 0.0, 0.0])  # the filler's time counts as the pause
    assert raw[:, 2].tolist() == [0, 0, 1]


def test_markup_the_transcript_kept_is_its_word_and_never_a_word_it_resembles(tmp_path):
    user_text = split_user_text("the [noise] noise level")
    rows = read_timing_rows(write(tmp_path, ["the\t0.0\t0.2", "[noise]\t0.3\t0.6", "noise\t0.8\t1.1",
                                             "level\t1.1\t1.4"]))
    assert match_timings(user_text, rows)[0].tolist() == [0.0, 0.3, 0.8, 1.1]
    plain = split_user_text("the noise level")  # the row [noise] is not the word "noise"
    assert match_timings(plain, rows)[0].tolist() == [0.0, 0.8, 1.1]


def test_recognisers_mr_and_the_transcripts_mr_dot_are_one_word(tmp_path):
    rows = read_timing_rows(write(tmp_path, ["thank\t0.0\t0.2", "you\t0.2\t0.4", "Mr\t0.5\t0.7", "Smith\t0.7\t1.1"]))
    assert match_timings(split_user_text("Thank you, Mr. Smith."), rows)[0].tolist() == [0.0, 0.2, 0.5, 0.7]


@pytest.mark.parametrize("rows, message", [
    # a recogniser's unknown word where the transcript has a word: which word it was is for the user to say
    (["so\t0.0\t0.3", "<unk>\t0.3\t0.9", "grew\t0.9\t1.2"],
     r"t\.tsv:3: the word '<unk>' does not match the transcript's word 2, 'we' \(talk\.txt:1\); '<unk>' is the "
     r"recogniser's mark of a word it could not spell: write the transcript's word 'we' in its place"),
    # a word the transcript does not have
    (["so\t0.0\t0.3", "like\t0.3\t0.5", "we\t0.5\t0.9", "grew\t0.9\t1.2"],
     r"t\.tsv:3: the word 'like' does not match the transcript's word 2, 'we' \(talk\.txt:1\); the next row is "
     r"that word: the row's word is not in the transcript \(remove the row, or add the word to the transcript\)"),
    # a transcript word without a row
    (["so\t0.0\t0.3", "grew\t0.9\t1.2"],
     r"t\.tsv:3: the word 'grew' does not match the transcript's word 2, 'we' \(talk\.txt:1\); the row is the "
     r"transcript's next word: the transcript's word has no row \(add a row for it, with empty times"),
    # a clitic row after the wrong word
    (["so\t0.0\t0.3", "we\t0.3\t0.5", "'s\t0.5\t0.6", "grew\t0.9\t1.2"],
     r"t\.tsv:4: the word \"'s\" does not match the transcript's word 3, 'grew' \(talk\.txt:1\)"),
])
def test_rows_that_are_not_the_transcripts_words_say_what_to_do(tmp_path, rows, message):
    with pytest.raises(TimingsMismatchError, match=message):
        match_timings(split_user_text("so we grew"), read_timing_rows(write(tmp_path, rows, name="t.tsv")),
                      transcript="talk.txt")


def test_a_ctm_with_confidences_unknown_words_and_noise(tmp_path):
    from inference.speech_input import ctm_source, read_timings

    path = tmp_path / "call.ctm"
    path.write_text("call 1 0.00 0.30 so 0.98\ncall 1 0.30 0.40 [noise] 0.41\ncall 1 0.70 0.20 <unk> 0.12\n"
                    "call 1 0.90 0.30 grew 0.95\n", encoding="utf-8")
    rows = read_timings(ctm_source(path, "call"))
    assert match_timings(split_user_text("so <unk> grew"), rows)[0].tolist() == pytest.approx([0.0, 0.7, 0.9])
    with pytest.raises(TimingsMismatchError, match=r"call\.ctm:3: the word '<unk>' does not match the "
                                                   r"transcript's word 2, 'we'.*write the transcript's word 'we'"):
        match_timings(split_user_text("so we grew"), rows)
