"""ASR tokens inheriting the times of the reference tokens they match (aligner/timing.py)."""

from __future__ import annotations

import math

from aligner import WordTiming, asr_mapping, inherit_timings


def test_inherit_timings_takes_the_reference_time_of_matched_tokens():
    nan = math.nan
    ref_words = ["so", "i", "do", "n't", "know"]
    ref = [WordTiming("so", 0.0, 0.2, True), WordTiming("i", 0.3, 0.4, True), WordTiming("do", 0.4, 0.5, True),
           WordTiming("n't", 0.5, 0.6, True), WordTiming("know", 0.6, 0.9, True)]
    asr_words = ["so", "uh", "i", "do", "not", "know"]
    own = [WordTiming("so", 0.0, 0.2, True), WordTiming("uh", 0.2, 0.3, False), WordTiming("i", 0.3, 0.4, False),
           WordTiming("do", 0.4, 0.5, True), WordTiming("not", nan, nan, False), WordTiming("know", 0.6, 0.9, True)]
    timings, sources = inherit_timings(asr_words, own, ref_words, ref)
    assert sources == ["own", "none", "inherited", "own", "inherited", "own"]
    assert (timings[2].start, timings[2].end, timings[2].aligned) == (0.3, 0.4, True)
    assert (timings[4].start, timings[4].end) == (0.5, 0.6)  # a substitution takes the replaced word's time
    assert timings[1].aligned is False and timings[1].start == 0.2  # the aligner's estimate, flagged
    # Without a reference alignment nothing is inherited; an inherited span that contradicts its neighbours
    # is refused.
    assert inherit_timings(asr_words, own, ref_words, None)[1] == ["own", "none", "none", "own", "none", "own"]
    late = list(ref)
    late[1] = WordTiming("i", 2.0, 2.1, True)
    assert inherit_timings(asr_words, own, ref_words, late)[1][2] == "none"


def test_asr_mapping_matches_equal_words_and_same_length_substitutions():
    asr = ["well", "so", "I", "do", "not", "know"]
    ref = ["so", "i", "do", "n't", "know"]
    assert asr_mapping(asr, ref) == [None, (0, "match"), (1, "match"), (2, "match"), (3, "substitution"),
                                     (4, "match")]
