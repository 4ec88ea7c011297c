"""corpus.anchors: comparable word keys, cutting a talk's tokens at the segment boundaries both transcripts agree on,
and the anchors file."""

from __future__ import annotations

import pytest

from corpus.anchors import (AnchorChunk, AnchorFormatError, TimedSegment, anchor_chunks, anchors_path_for, check_chunks,
                            read_anchors, word_keys, write_anchors)
from corpus.text import tokenize_for_inference


def test_keys_line_up_benchmark_and_tedlium_tokenisation():
    benchmark = tokenize_for_inference("I don't know, it's Schrödinger's high-functioning cat -- 6,400!")
    assert benchmark[:5] == ["i", "do", "n't", "know", "it"]
    keys, owners = word_keys(benchmark)
    tedlium = word_keys("i don 't know it 's schrodinger 's highfunctioning cat 6400".split())[0]
    assert keys == tedlium == ["i", "dont", "know", "its", "schrodingers", "highfunctioning", "cat", "6400"]
    assert [benchmark[i] for i in owners] == ["i", "do", "know", "it", "schrödinger", "high-functioning", "cat",
                                              "6,400"]
    assert word_keys(["--", "'", "ok"]) == (["ok"], [2])


SENTENCES = ["so i do n't know".split(), "the river was cold that morning".split(), "we went home".split(),
             "she laughed at me".split()]
WORDS = [word for sentence in SENTENCES for word in sentence]
SEGMENTS = [TimedSegment(0.5, 2.0, ("so", "i", "don", "'t", "know")),
            TimedSegment(2.4, 5.0, ("the", "river", "was", "cold", "that", "morning")),
            TimedSegment(5.0, 6.5, ("we", "went", "home")),
            TimedSegment(7.0, 8.6, ("she", "laughed", "at", "me"))]


def test_cuts_fall_between_segments_at_the_middle_of_their_gap():
    chunks, stats = anchor_chunks(WORDS, SEGMENTS, duration=9.0, max_chunk_s=1.0, min_matched_share=0.5)
    assert chunks == [AnchorChunk(0, 5, 0.0, 2.2), AnchorChunk(5, 6, 2.2, 5.0), AnchorChunk(11, 3, 5.0, 6.75),
                      AnchorChunk(14, 4, 6.75, 9.0)]
    assert stats["anchored"] and stats["matched_share"] == 1.0 and stats["cuts_available"] == 3
    check_chunks(chunks, len(WORDS))


def test_chunks_are_merged_up_to_the_longest_allowed():
    chunks, _ = anchor_chunks(WORDS, SEGMENTS, duration=9.0, max_chunk_s=5.5, min_matched_share=0.5)
    assert chunks == [AnchorChunk(0, 11, 0.0, 5.0), AnchorChunk(11, 7, 5.0, 9.0)]
    whole, stats = anchor_chunks(WORDS, SEGMENTS, duration=9.0, max_chunk_s=60, min_matched_share=0.5)
    assert whole == [AnchorChunk(0, len(WORDS), 0.0, 9.0)] and not stats["anchored"]


def test_no_cut_where_the_transcripts_disagree_and_no_anchors_when_they_mostly_do():
    # the talk has a word the segments lack at the second boundary, and the third boundary's words differ
    words = WORDS[:11] + ["um"] + WORDS[11:14] + ["well"] + WORDS[14:]
    chunks, stats = anchor_chunks(words, SEGMENTS, duration=9.0, max_chunk_s=1.0, min_matched_share=0.5)
    assert [(c.first, c.count) for c in chunks] == [(0, 5), (5, len(words) - 5)]
    assert stats["cuts_available"] == 1
    other = "a completely different talk about nothing that was said here at all ever".split()
    chunks, stats = anchor_chunks(other, SEGMENTS, duration=9.0, max_chunk_s=1.0, min_matched_share=0.5)
    assert chunks == [AnchorChunk(0, len(other), 0.0, 9.0)] and stats["anchored"] is False
    assert stats["matched_share"] == 0.0


def test_a_stretch_without_cuts_makes_a_longer_chunk():
    segments = [TimedSegment(0.0, 30.0, tuple(WORDS[:11])), TimedSegment(30.5, 40.0, tuple(WORDS[11:]))]
    chunks, _ = anchor_chunks(WORDS, segments, duration=40.0, max_chunk_s=10.0, min_matched_share=0.5)
    assert chunks == [AnchorChunk(0, 11, 0.0, 30.25), AnchorChunk(11, 7, 30.25, 40.0)]


def test_anchors_file_round_trip_and_checks(tmp_path):
    chunks, _ = anchor_chunks(WORDS, SEGMENTS, duration=9.0, max_chunk_s=1.0, min_matched_share=0.5)
    path = anchors_path_for(tmp_path / "talk.wav")
    assert path.name == "talk.anchors.tsv"
    write_anchors(path, chunks)
    assert path.read_text().splitlines()[:2] == ["first_token\ttokens\tstart\tend", "0\t5\t0.000\t2.200"]
    assert read_anchors(path) == chunks
    path.write_text("first_token\ttokens\tstart\tend\n0\t5\tx\t1\n")
    with pytest.raises(AnchorFormatError, match=r"talk\.anchors\.tsv:2"):
        read_anchors(path)
    with pytest.raises(AnchorFormatError, match="chunk 2 starts at token 4, expected 5"):
        check_chunks([AnchorChunk(0, 5, 0, 1), AnchorChunk(4, 2, 1, 2)], 6)
    with pytest.raises(AnchorFormatError, match="cover 5 tokens, the talk has 6"):
        check_chunks([AnchorChunk(0, 5, 0, 1)], 6)
    with pytest.raises(AnchorFormatError, match="before the previous one ends"):
        check_chunks([AnchorChunk(0, 3, 0, 2), AnchorChunk(3, 3, 1, 3)], 6)
    with pytest.raises(ValueError, match="max_chunk_s"):
        anchor_chunks(WORDS, SEGMENTS, duration=9.0, max_chunk_s=0, min_matched_share=0.5)
