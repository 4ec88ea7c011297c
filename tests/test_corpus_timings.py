"""Word times as ASR systems write them (``corpus.timings``): NIST/Kaldi CTM and recognisers' JSON word lists, in
the layouts their documentation publishes; errors name the file and the line or entry."""

from __future__ import annotations

import json
import math

import pytest

from corpus.timings import CtmUtterance, TimingsFormatError, index_ctm, read_ctm_utterance, read_word_json

# NIST sclite's CTM: <F> <C> <BT> <DUR> word [<CONF>], ';;' comments; Kaldi's (steps/get_ctm.sh): utterance,
# channel 1, start, duration, word, confidence. Several utterances a file, each utterance's lines together.
NIST_CTM = """;; CTM of two conversation sides
sw02001 A 0.35 0.20 so 0.98
sw02001 A 0.55 0.31 i 0.87
sw02001 A 0.86 0.44 don't
;; a comment inside the second utterance's span is skipped
sw02001-b B 2.00 0.30 well 0.50
sw02001-b B 2.40 0.25 okay 0.61
"""
KALDI_CTM = ("AlGore_2006-0001-0042 1 0.00 0.30 thank 1.00\n"
             "AlGore_2006-0001-0042 1 0.30 0.25 you 1.00\n"
             "AmySmith_2006-0003-0051 1 0.12 0.40 hello 0.97\n")


def test_a_ctm_is_indexed_by_utterance_and_each_is_read_with_its_lines(tmp_path):
    path = tmp_path / "all.ctm"
    path.write_text(NIST_CTM, encoding="utf-8")
    utterances, problems = index_ctm(path)
    assert problems == {} and list(utterances) == ["sw02001", "sw02001-b"]
    first = utterances["sw02001"]
    assert first.first_line == 2 and path.read_bytes()[first.start:first.end].decode().startswith("sw02001 A 0.35")
    timings, lines = read_ctm_utterance(path, first)
    assert [(t.word, t.start, round(t.end, 6)) for t in timings] == [("so", 0.35, 0.55), ("i", 0.55, 0.86),
                                                                     ("don't", 0.86, 1.3)]
    assert lines == [2, 3, 4] and all(t.aligned for t in timings)
    timings, lines = read_ctm_utterance(path, utterances["sw02001-b"])
    assert [t.word for t in timings] == ["well", "okay"] and lines == [6, 7]


def test_a_kaldi_ctm_of_a_whole_data_set(tmp_path):
    path = tmp_path / "ctm"
    path.write_bytes(KALDI_CTM.encode("utf-8").replace(b"\n", b"\r\n"))  # CRLF too
    utterances, _ = index_ctm(path)
    assert list(utterances) == ["AlGore_2006-0001-0042", "AmySmith_2006-0003-0051"]
    timings, lines = read_ctm_utterance(path, utterances["AmySmith_2006-0003-0051"])
    assert [(t.word, t.start) for t in timings] == [("hello", 0.12)] and lines == [3]
    # the span's SHA-256 is of its own bytes: what a resumed run compares
    span = utterances["AlGore_2006-0001-0042"]
    import hashlib

    assert span.sha256 == hashlib.sha256(path.read_bytes()[span.start:span.end]).hexdigest()


def test_an_utterance_whose_lines_are_not_together_is_named(tmp_path):
    path = tmp_path / "split.ctm"
    path.write_text("a 1 0.0 0.1 so\nb 1 0.0 0.1 well\na 1 0.2 0.1 it\n", encoding="utf-8")
    utterances, problems = index_ctm(path)
    assert list(utterances) == ["b"]
    assert problems["a"].startswith(f"{path}:3: utterance 'a' goes on here after other utterances (it starts at "
                                    "line 1)")


@pytest.mark.parametrize("line, message", [
    ("u 1 0.5 0.1", r"x\.ctm:2: expected 'utterance channel start duration word \[confidence\]', found 4 field"),
    ("u 1 soon 0.1 it", r"x\.ctm:2: start time 'soon' is not a number"),
    ("u 1 0.5 -0.1 it", r"x\.ctm:2: duration -0\.1 is negative"),
    ("u 1 0.5 nan it", r"x\.ctm:2: duration 'nan' is not a finite number"),
    ("u 1 0.1 0.1 it", r"x\.ctm:2: times out of order: line 2 \('it'\) starts at 0\.1 s, before line 1 \('so', "
                       r"0\.3 s to 0\.4 s\) starts; a word may start before the word before it ends"),
    ("u 2 0.5 0.1 it", r"x\.ctm:2: channel '2' after channel '1'"),
])
def test_bad_ctm_lines_name_the_file_and_line(tmp_path, line, message):
    path = tmp_path / "x.ctm"
    path.write_text(f"u 1 0.3 0.1 so\n{line}\n", encoding="utf-8")
    utterances, _ = index_ctm(path)
    with pytest.raises(TimingsFormatError, match=message):
        read_ctm_utterance(path, utterances["u"])


WHISPER = {  # openai-whisper --word_timestamps True --output_format json
    "text": " So, I don't know.",
    "segments": [
        {"id": 0, "seek": 0, "start": 0.0, "end": 1.4, "text": " So, I don't", "tokens": [50364, 407],
         "temperature": 0.0, "avg_logprob": -0.3, "compression_ratio": 0.8, "no_speech_prob": 0.02,
         "words": [{"word": " So,", "start": 0.0, "end": 0.32, "probability": 0.71},
                   {"word": " I", "start": 0.5, "end": 0.62, "probability": 0.98},
                   {"word": " don't", "start": 0.62, "end": 1.4, "probability": 0.99}]},
        {"id": 1, "seek": 0, "start": 1.4, "end": 2.0, "text": " know.",
         "words": [{"word": " know.", "start": 1.4, "end": 2.0, "probability": 0.97}]},
    ],
    "language": "en",
}
VOSK = {"result": [{"conf": 1.0, "end": 0.32, "start": 0.0, "word": "so"},
                   {"conf": 0.93, "end": 0.62, "start": 0.5, "word": "i"}], "text": "so i"}
WHISPERX = {"segments": [{"start": 0.0, "end": 2.0, "text": "it was 1999",  # a numeral without times
                          "words": [{"word": "it", "start": 0.0, "end": 0.2, "score": 0.9},
                                    {"word": "was", "start": 0.2, "end": 0.5, "score": 0.9},
                                    {"word": "1999"}]}],
            "word_segments": []}
PLAIN = [{"text": "so", "start": 0, "end": 0.3}, {"text": "i", "start": 0.5, "end": 0.6}]
WORDS = {"words": [{"word": "so", "start": 0.0, "end": 0.3}]}


@pytest.mark.parametrize("data, words, entries", [
    (WHISPER, ["So,", "I", "don't", "know."],
     ["segments[0].words[0]", "segments[0].words[1]", "segments[0].words[2]", "segments[1].words[0]"]),
    (VOSK, ["so", "i"], ["result[0]", "result[1]"]),
    (WHISPERX, ["it", "was", "1999"], ["segments[0].words[0]", "segments[0].words[1]", "segments[0].words[2]"]),
    (PLAIN, ["so", "i"], ["[0]", "[1]"]),
    (WORDS, ["so"], ["words[0]"]),
])
def test_recognisers_json_word_lists(tmp_path, data, words, entries):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    timings, found = read_word_json(path)
    assert [t.word for t in timings] == words and found == entries
    assert timings[0].start == 0.0 and timings[0].aligned
    if data is WHISPERX:
        assert math.isnan(timings[2].start) and not timings[2].aligned  # no time: a word without a time


@pytest.mark.parametrize("data, message", [
    ({"segments": [{"words": [{"word": "so", "start": "soon", "end": 0.3}]}]},
     r"t\.json: segments\[0\]\.words\[0\]: start time 'soon' is not a number"),
    ([{"word": "so", "start": -1, "end": 0.3}], r"t\.json: \[0\]: start time -1\.0 is negative"),
    ([{"word": "so", "start": 0.5, "end": 0.6}, {"word": "i", "start": 0.2, "end": 0.3}],
     r"t\.json: \[1\]: times out of order: \[1\] \('i'\) starts at 0\.2 s, before \[0\] \('so', 0\.5 s to 0\.6 s\) "
     r"starts"),
    ([{"word": "so", "start": 0.5, "end": 0.4}], r"t\.json: \[0\]: end 0\.4 is before start 0\.5"),
    ([{"word": "so", "start": 0.5}], r"t\.json: \[0\]: only one of start and end"),
    ([{"start": 0.5, "end": 0.6}], r"t\.json: \[0\]: no word"),
    ([{"word": "so", "start": True, "end": 0.6}], r"t\.json: \[0\]: start time True is not a number"),
    ({"segments": [{"text": "no word timestamps"}]}, r"t\.json: segments\[0\] has no list 'words'"),
    ({"text": "so i"}, r"t\.json: no word list"),
])
def test_bad_json_names_the_file_and_entry(tmp_path, data, message):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(TimingsFormatError, match=message):
        read_word_json(path)


def test_json_that_does_not_parse_names_the_line(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"words": [\n{"word": "so", "start": 0.1,}\n]}', encoding="utf-8")
    with pytest.raises(TimingsFormatError, match=r"t\.json:2: not valid JSON"):
        read_word_json(path)
    path.write_bytes(b'[{"word": "\xff"}]')
    with pytest.raises(TimingsFormatError, match=r"t\.json:1: not valid UTF-8"):
        read_word_json(path)


def test_a_span_may_be_given_its_bytes(tmp_path):
    path = tmp_path / "x.ctm"
    path.write_text("u 1 0.3 0.1 so\n", encoding="utf-8")
    span = CtmUtterance("u", 0, path.stat().st_size, 1, "")
    timings, _ = read_ctm_utterance(path, span, data=b"u 1 0.4 0.1 it\n")
    assert timings[0].word == "it"


# ----------------------------------------------------------------------------- times as aligners write them
# Recognisers and forced aligners let neighbouring words touch (in Earnings-22's forced alignments 60 % of the
# timed words start exactly where the timed word before ends) or overlap (7 %, by at most a millisecond there);
# a word starting before the word before it *started* is a file out of order (none in Earnings-22).


def _read(tmp_path, kind: str, rows: list[tuple[str, float | None, float | None]]):
    """The timings of ``rows`` (word, start, end; None: no time) written as ``kind`` and read back."""
    from corpus.timings import read_word_tsv

    if kind == "tsv":
        path = tmp_path / "t.tsv"
        path.write_text("word\tstart\tend\n" + "".join(
            f"{w}\t{'' if a is None else a}\t{'' if b is None else b}\n" for w, a, b in rows), encoding="utf-8")
        return read_word_tsv(path)
    if kind == "ctm":
        path = tmp_path / "t.ctm"
        path.write_text("".join(f"u 1 {a} {round(b - a, 6)} {w} 0.9\n" for w, a, b in rows if a is not None),
                        encoding="utf-8")
        return read_ctm_utterance(path, index_ctm(path)[0]["u"])[0]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"words": [{"word": w, "start": a, "end": b} for w, a, b in rows]}), encoding="utf-8")
    return read_word_json(path)[0]


@pytest.mark.parametrize("kind", ["tsv", "ctm", "json"])
def test_touching_and_overlapping_words_are_read_as_given(tmp_path, kind):
    rows = [("so", 0.5, 0.9), ("we", 0.9, 1.2), ("grew", 1.1, 1.6), ("fast", 1.1, 1.3), ("then", 1.25, 1.5)]
    timings = _read(tmp_path, kind, rows)  # touching; overlapping; starting with the word before; inside it
    assert [(t.word, t.start, round(t.end, 6)) for t in timings] == rows and all(t.aligned for t in timings)


@pytest.mark.parametrize("kind, where, before", [("tsv", r"t\.tsv:4", "line 4"), ("ctm", r"t\.ctm:3", "line 3"),
                                                 ("json", r"t\.json: words\[2\]", r"words\[2\]")])
def test_a_word_starting_before_the_word_before_it_started_names_both_rows(tmp_path, kind, where, before):
    rows = [("so", 0.5, 0.9), ("we", 1.0, 1.2), ("grew", 0.8, 1.6)]  # 0.2 s before "we" started: out of order
    previous = {"tsv": "line 3", "ctm": "line 2", "json": r"words\[1\]"}[kind]
    with pytest.raises(TimingsFormatError, match=rf"{where}: times out of order: {before} \('grew'\) starts at "
                                                 rf"0\.8 s, before {previous} \('we', 1\.0 s to 1\.2 s\) starts"):
        _read(tmp_path, kind, rows)


@pytest.mark.parametrize("kind", ["tsv", "json"])
def test_untimed_words_are_left_out_of_the_order(tmp_path, kind):
    rows = [("so", 0.5, 0.9), ("we", None, None), ("grew", None, None), ("fast", 0.9, 1.3)]
    timings = _read(tmp_path, kind, rows)
    assert [t.aligned for t in timings] == [True, False, False, True] and math.isnan(timings[1].start)
    where = {"tsv": r"t\.tsv:5: times out of order: line 5", "json": r"t\.json: words\[3\]: times out of order"}[kind]
    with pytest.raises(TimingsFormatError, match=rf"{where}.*before (line 2|words\[0\]) \('so'"):
        _read(tmp_path, kind, [*rows[:3], ("fast", 0.4, 0.6)])  # compared with the last timed word, not the untimed


@pytest.mark.parametrize("kind", ["tsv", "ctm", "json"])
def test_a_long_silence_between_words_is_data(tmp_path, kind):
    rows = [("thank", 0.5, 0.9), ("you", 0.9, 1.2), ("good", 601.2, 1601.4), ("morning", 1601.4, 1602.0)]
    timings = _read(tmp_path, kind, rows)  # ten minutes of hold music; a word held for 1000 s
    assert [(t.start, round(t.end, 6)) for t in timings] == [(a, b) for _, a, b in rows]


def test_a_ctm_with_confidences_and_recogniser_markup_is_read_as_written(tmp_path):
    path = tmp_path / "x.ctm"
    path.write_text("u 1 0.00 0.30 so 0.98\nu 1 0.30 0.25 [noise] 0.41\nu 1 0.55 0.20 <unk> 0.12\n"
                    "u 1 0.75 0.10 %HESITATION 0.50\n", encoding="utf-8")
    timings, lines = read_ctm_utterance(path, index_ctm(path)[0]["u"])
    assert [t.word for t in timings] == ["so", "[noise]", "<unk>", "%HESITATION"] and lines == [1, 2, 3, 4]
