"""corpus.earnings22: Earnings-22's ``.nlp`` calls and ``splits.tsv`` read, errors naming the file and line, and a
call turned into benchmark tokens and labels as the TED text is."""

from __future__ import annotations

import math
import re

import pytest

from corpus.earnings22 import (
    Earnings22FormatError,
    read_call,
    read_splits,
    spoken_words,
    token_labels,
)
from tests.fixture_earnings22 import CALL_ROWS, HEADER, nlp_line, write_call, write_earnings22


def test_a_call_is_read_by_its_columns(tmp_path):
    path = write_call(tmp_path, "c1", CALL_ROWS)
    call = read_call(path)
    assert call.name == "c1" and len(call.words) == len(CALL_ROWS)
    good, morning = call.words[:2]
    assert (good.token, good.speaker, good.start, good.end, good.mark, good.case) == ("Good", 0, 0.08, 0.4, "", "UC")
    assert morning.label == "COMMA" and morning.line == 3
    assert call.words[2].tags == ("CONTRACTION",) and call.words[3].tags == ("ABBREVIATION",)
    untimed = call.words[8]
    assert untimed.token == "we" and not untimed.timed and math.isnan(untimed.start) and math.isnan(untimed.end)
    assert untimed.ali_comment == "del"
    assert [w.speaker for w in call.words[6:8]] == [0, 1]
    assert call.words[-1].mark == "\u2026" and call.words[-1].label == "PERIOD"


def test_an_extra_column_is_read_by_the_header(tmp_path):
    write_earnings22(tmp_path)
    plain = read_call(tmp_path / "aligned" / "c1.aligned.nlp")
    extra = read_call(tmp_path / "aligned" / "c2.aligned.nlp")
    assert "wer_tags" in (tmp_path / "aligned" / "c2.aligned.nlp").read_text().splitlines()[0]
    assert [(w.token, w.mark, w.tags) for w in extra.words] == [(w.token, w.mark, w.tags) for w in plain.words]


def test_words_become_benchmark_tokens_with_the_label_on_the_last():
    """Contractions split as IWSLT2011's, lower case; the annotation dropped and its period given to the word before;
    the ellipsis a PERIOD; a stretch without times keeps NaN, never a 0."""
    from corpus.earnings22 import Call, CallWord

    words = tuple(CallWord(t, s, math.nan if a is None else a, math.nan if b is None else b, m, "", c, (), x, n)
                  for n, (t, s, a, b, m, c, _, x) in enumerate(CALL_ROWS, start=2))
    spoken = spoken_words(Call("c1", None, words))
    tokens, labels = token_labels(spoken)
    assert tokens == ["good", "morning", "it", "'s", "latam", "'s", "call", "any", "questions", "yes", "we", "do",
                      "n't", "know", "the", "margin", "thanks"]
    assert [(t, l) for t, l in zip(tokens, labels) if l != "O"] == [
        ("morning", "COMMA"), ("call", "PERIOD"), ("questions", "QUESTION"), ("yes", "COMMA"), ("margin", "PERIOD"),
        ("thanks", "PERIOD")]
    assert "<inaudible>" not in [w.text for w in spoken] and [w.text for w in spoken][2:4] == ["it's", "latam's"]
    we = next(w for w in spoken if w.text == "we")
    assert math.isnan(we.start) and not we.timed
    assert next(w for w in spoken if w.text == "margin").start == 6.05  # an overlap of the alignment is data


@pytest.mark.parametrize(("line", "reason"), [
    ("Good|0|0.08|0.40|||UC|[]||", "10 cells, the header has 11 columns"),
    ("Good|0|zero|0.40|||UC|[]|||", "ts 'zero' is not a number"),
    ("Good|0|-1|0.40|||UC|[]|||", "not a non-negative number"),
    ("Good|0|0.50|0.40|||UC|[]|||", "endTs 0.4 is before ts 0.5"),
    ("Good|0||0.40|||UC|[]|||", "only one of ts and endTs"),
    ("Good|0|0.08|0.40|#||UC|[]|||", "unknown mark '#'"),
    ("Good|0|0.08|0.40|||XX|[]|||", "unknown case 'XX'"),
    ("Good|0|0.08|0.40|||UC|[YEAR]|||", "tags '[YEAR]' are not a list"),
    ("Good|A|0.08|0.40|||UC|[]|||", "speaker 'A' is not a whole number"),
    ("|0|0.08|0.40|||UC|[]|||", "empty token"),
])
def test_a_malformed_row_names_the_file_and_line(tmp_path, line, reason):
    path = write_call(tmp_path, "bad", [], lines=[nlp_line(CALL_ROWS[0]), line])
    with pytest.raises(Earnings22FormatError, match=r"bad\.aligned\.nlp:3: ") as caught:
        read_call(path)
    assert reason in str(caught.value)


def test_times_going_backwards_are_an_error_an_overlap_is_not(tmp_path):
    later = nlp_line(("later", 0, 2.0, 2.5, "", "LC", "[]", ""))
    overlap = nlp_line(("overlap", 0, 2.1, 2.3, "", "LC", "[]", ""))
    earlier = nlp_line(("earlier", 0, 1.0, 1.2, "", "LC", "[]", ""))
    untimed = nlp_line(("untimed", 0, None, None, "", "LC", "[]", "del"))
    assert len(read_call(write_call(tmp_path, "ok", [], lines=[later, untimed, overlap])).words) == 3
    with pytest.raises(Earnings22FormatError, match=r"back\.aligned\.nlp:4: times go backwards: starts at 1\.0 s, "
                                                    r"before the word of line 2"):
        read_call(write_call(tmp_path, "back", [], lines=[later, untimed, earlier]))


def test_a_header_without_a_column_or_a_file_without_rows_is_named(tmp_path):
    with pytest.raises(Earnings22FormatError, match=r"nohead\.aligned\.nlp:1: the header has no column case"):
        read_call(write_call(tmp_path, "nohead", CALL_ROWS, header=HEADER.replace("|case|", "|kase|")))
    with pytest.raises(Earnings22FormatError, match=r"empty\.aligned\.nlp:1: no rows"):
        read_call(write_call(tmp_path, "empty", [], lines=[]))


def test_splits_are_read_in_order_and_a_bad_row_is_named(tmp_path):
    path = tmp_path / "splits.tsv"
    path.write_text("file_id\tsplit\nc1\ttrain\n\nc2\ttest\n", encoding="utf-8")
    assert [(r.call, r.split, r.line) for r in read_splits(path)] == [("c1", "train", 2), ("c2", "test", 4)]
    for body, reason in (("c1\ttrain\nc1\tdev\n", "splits.tsv:3: call 'c1' is named again (first at line 2)"),
                         ("c1\tvalidation\n", "splits.tsv:2: unknown split 'validation'"),
                         ("c1\ttrain\textra\n", "splits.tsv:2: expected file_id<TAB>split, found 3 cell(s)")):
        path.write_text("file_id\tsplit\n" + body, encoding="utf-8")
        with pytest.raises(Earnings22FormatError, match=re.escape(reason)):
            read_splits(path)
    path.write_text("call,split\nc1,train\n", encoding="utf-8")
    with pytest.raises(Earnings22FormatError, match=r"splits\.tsv:1: expected the header"):
        read_splits(path)
