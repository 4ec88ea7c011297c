"""Talk segmentation of the benchmark splits (corpus/talks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus.talks import (
    TalkSegmentationError,
    check_cover,
    pseudo_talks,
    segment_talks,
    test_talks,
    train_talks,
)
from corpus.iwslt import write_iwslt

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
IWSLT = SHARED / "iwslt2011"
REF_XML = IWSLT / "IWSLT12.TED.MT.tst2011.en-fr.en.xml"
ASR_XML = IWSLT / "IWSLT12.TED.SLT.tst2011.en-fr.en.system0.comma.xml"

XML = """<?xml version="1.0" encoding="UTF-8"?>
<mteval>
<srcset setid="x" srclang="english">
<doc docid="{a}" genre="lectures">
<title>First</title>
<seg id="1">  I'm a savant, or more precisely, a high-functioning savant.  </seg>
<seg id="2">  It's rare.  </seg>
</doc>
<doc docid="{b}" genre="lectures">
<seg id="1">  Good morning. How are you?  </seg>
<seg id="2">  It's been great, hasn't it?  </seg>
</doc>
</srcset>
</mteval>
"""


def _fake_pair(tmp_path: Path, *, a: str = "11", b: str = "12") -> tuple[Path, Path, list[str]]:
    xml = tmp_path / "src.xml"
    xml.write_text(XML.format(a=a, b=b), encoding="utf-8")
    words = (
        "i 'm a savant or more precisely a high-functioning savant it 's rare /seg "  # artefact at the talk end
        "good morning how are you it 's been great has n't it"
    ).split()
    labels = ["O"] * len(words)
    iwslt = write_iwslt(tmp_path / "split", words, labels)
    return xml, iwslt, words


def test_segmentation_of_a_tiny_pair(tmp_path):
    xml, iwslt, words = _fake_pair(tmp_path)
    result = segment_talks(xml, iwslt)
    assert [(t.talk_id, t.first_token, t.tokens) for t in result.talks] == [("11", 0, 14), ("12", 14, 12)]
    assert result.talks[0].words[-1] == "/seg"  # a filled token goes to the talk it follows
    assert result.report["filled_tokens"] == 1
    assert result.report["filled"] == [{"index": 13, "word": "/seg", "talk": "11"}]
    assert result.report["matched_tokens"] == len(words) - 1
    check_cover(result.talks, len(words))
    assert [t.talk_id for t in test_talks(xml, iwslt)] == ["11", "12"]


def test_segmentation_refuses_mismatched_sources(tmp_path):
    xml, _, _ = _fake_pair(tmp_path)
    other = write_iwslt(tmp_path / "other", ["completely", "different", "words"] * 5, ["O"] * 15)
    with pytest.raises(TalkSegmentationError, match="match the XML"):
        segment_talks(xml, other)
    # The XML may list the talks in another order than the split: documents are ordered by where they occur.
    swapped = tmp_path / "swapped.xml"
    text = XML.format(a="11", b="12")
    first, second = text.index('<doc docid="11"'), text.index('<doc docid="12"')
    end = text.index("</srcset>")
    swapped.write_text(text[:first] + text[second:end] + text[first:second] + text[end:], encoding="utf-8")
    talks = segment_talks(swapped, tmp_path / "split").talks
    assert [(t.talk_id, t.tokens) for t in talks] == [("11", 14), ("12", 12)]
    # A talk whose tokens lie in two separate places of the split cannot be one range.
    words = "good morning how are you i 'm a savant or more precisely a high-functioning savant it 's rare".split()
    words += "it 's been great has n't it".split()
    interleaved = write_iwslt(tmp_path / "interleaved", words, ["O"] * len(words))
    with pytest.raises(TalkSegmentationError):
        segment_talks(xml, interleaved)


def test_train_talks(tmp_path):
    words = [f"w{i}" for i in range(10)]
    labels = ["O"] * 9 + ["PERIOD"]
    write_iwslt(tmp_path / "train.tsv", words, labels)
    rows = "talk\tfirst_token\ttokens\nA_talk\t0\t4\nB's talk\t4\t6\n"
    (tmp_path / "train_talks.tsv").write_text(rows, encoding="utf-8")
    talks = train_talks(tmp_path / "train.tsv", tmp_path / "train_talks.tsv")
    assert [(t.talk_id, t.first_token, t.tokens, t.words[0]) for t in talks] == [
        ("A_talk", 0, 4, "w0"),
        ("B's talk", 4, 6, "w4"),
    ]
    (tmp_path / "bad.tsv").write_text("talk\tfirst_token\ttokens\nA\t0\t4\nB\t5\t5\n", encoding="utf-8")
    with pytest.raises(TalkSegmentationError, match="starts at token 5"):
        train_talks(tmp_path / "train.tsv", tmp_path / "bad.tsv")


def test_pseudo_talks_cut_at_sentence_ends_and_transcript_tags():
    words, labels = [], []
    for sentence in range(30):
        words += [f"s{sentence}w{k}" for k in range(5)]
        labels += ["O"] * 4 + ["PERIOD"]
    words[49] = "/transcript"  # a talk end inside: a hard cut after it
    talks = pseudo_talks(words, labels, target_tokens=12, prefix="dev")
    check_cover(talks, len(words))
    assert talks[0].talk_id == "dev-000"
    ends = {t.end_token for t in talks}
    assert 50 in ends
    for talk in talks:
        assert talk.labels[-1] == "PERIOD"
        assert 12 * 0.25 <= talk.tokens <= 2 * 12 + 5
    # No sentence end at all: hard cuts at twice the target; a short remainder is merged.
    talks = pseudo_talks([f"w{i}" for i in range(55)], ["O"] * 55, target_tokens=10)
    assert [t.tokens for t in talks] == [20, 20, 15]


@pytest.mark.skipif(not REF_XML.is_file(), reason=f"shared data not found at {IWSLT}")
def test_real_test2011_ref_and_asr():
    expected_docs = ["1175", "1169", "1178", "1181", "1174", "1182", "1183", "1187"]
    for xml, split, tokens in ((REF_XML, "test2011", 12626), (ASR_XML, "test2011asr", 12822)):
        result = segment_talks(xml, IWSLT / split)
        assert [t.talk_id for t in result.talks] == expected_docs, split
        check_cover(result.talks, tokens)
        assert result.report["filled_tokens"] <= 10, result.report["filled"]
        # Each talk's range has as many tokens as its normalised XML document, give or take the artefacts.
        for row in result.report["per_talk"]:
            assert abs(row["tokens"] - row["xml_tokens"]) <= 3, row
