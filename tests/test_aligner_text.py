"""Alignment units, pronunciations, interpolation and result checks (no audio, no decoder)."""

from __future__ import annotations

import math

import pytest

from aligner import WordTiming, interpolate
from aligner.pronounce import (
    ARPABET,
    Lexicon,
    Unit,
    clitic_phone_count,
    flite_available,
    make_units,
    to_arpabet,
)
from aligner.timing import check_timings

NAN = float("nan")
needs_flite = pytest.mark.skipif(not flite_available(), reason="flite is not installed (apt-get install flite)")


def test_clitics_merge_with_the_previous_token():
    units = make_units(["'s", "i", "do", "n't", "know", "it", "'s", "john", "'s", "'m"])
    assert [unit.text for unit in units] == ["'s", "i", "don't", "know", "it's", "john's", "'m"]
    assert [unit.tokens for unit in units] == [(0,), (1,), (2, 3), (4,), (5, 6), (7, 8), (9,)]
    assert units[2] == Unit("don't", (2, 3), "do", "n't")
    # every token belongs to exactly one unit, in order
    assert [token for unit in units for token in unit.tokens] == list(range(10))


@pytest.mark.parametrize(
    ("merged", "hosts", "clitic", "count"),
    [
        ("IH Z AH N T", ["IH Z"], "n't", 3),  # is|n't: host is a prefix
        ("D OW N T", ["D UW"], "n't", 2),  # do|n't: from the last N
        ("D OW N", ["D UW"], "n't", 1),  # variant without T
        ("HH IY Z", ["HH IY"], "'s", 1),
        ("DH EH R", ["DH EY"], "'re", 1),
        ("AY M", ["AY"], "'m", 1),
        ("T", ["T"], "'s", 0),  # nothing to split
    ],
)
def test_clitic_phone_count(merged, hosts, clitic, count):
    assert clitic_phone_count(merged.split(), [host.split() for host in hosts], clitic) == count


def test_flite_phones_map_to_the_model_phone_set():
    assert to_arpabet(["pau", "dh", "ax", "k", "ae", "t", "axr", "el", "pau"]) == [
        "DH", "AH", "K", "AE", "T", "ER", "AH", "L"]
    assert set(to_arpabet("aa ae ah ao aw ax axr ay b ch d dh dx eh el em en er ey f g hh hv ih ix iy jh k l m n "
                          "nx ng ow oy p r s sh t th uh uw ux v w y z zh".split())) <= ARPABET


def _dictionary(entries: dict[str, str]):
    return entries.get


def test_lexicon_dictionary_variants_and_fallbacks():
    lexicon = Lexicon(_dictionary({"the": "DH AH", "the(2)": "DH IY", "high": "HH AY", "five": "F AY V",
                                   "mr": "M IH S T ER", "cafe": "K AE F EY"}), flite=None)
    assert lexicon.pronunciations("the") == [["DH", "AH"], ["DH", "IY"]]
    assert lexicon.pronunciations("mr.") == [["M", "IH", "S", "T", "ER"]]
    assert lexicon.pronunciations("high-five") == [["HH", "AY", "F", "AY", "V"]]
    assert lexicon.pronunciations("café") == [["K", "AE", "F", "EY"]]
    assert lexicon.pronunciations("zorblaxian") == []  # no flite: no pronunciation
    assert lexicon.pronunciations(Unit("'s", (0,))) == [["Z"]]


@needs_flite
def test_out_of_vocabulary_word_gets_a_pronunciation_from_flite():
    lexicon = Lexicon(_dictionary({"do": "D UW"}), flite="flite")
    pronunciations = lexicon.pronunciations("zorblaxian")
    assert pronunciations and pronunciations[0] and set(pronunciations[0]) <= ARPABET
    assert "zorblaxian" in lexicon.g2p_words
    assert len(lexicon.pronunciations("1950")) == 2  # year and cardinal readings
    assert lexicon.pronunciations("6,400")[0][:3] == ["S", "IH", "K"]  # six thousand four hundred
    merged = lexicon.pronunciations(Unit("don't", (0, 1), "do", "n't"))[0]
    assert merged[-1] == "T" and lexicon.split_count(Unit("don't", (0, 1), "do", "n't"), merged) >= 1


def test_interpolate_spreads_runs_between_neighbours():
    timings = [WordTiming("a", NAN, NAN, False), WordTiming("bb", 1.0, 1.5, True),
               WordTiming("cc", NAN, NAN, False), WordTiming("dddd", NAN, NAN, False),
               WordTiming("e", 2.1, 2.4, True), WordTiming("f", NAN, NAN, False)]
    result = interpolate(timings, 3.0)
    assert [t.word for t in result] == ["a", "bb", "cc", "dddd", "e", "f"]
    assert [t.aligned for t in result] == [False, True, False, False, True, False]
    assert result[0].start == 0.0 and result[0].end == pytest.approx(1.0)
    assert result[2].start == pytest.approx(1.5) and result[2].end == pytest.approx(1.7)  # 2 of 6 letters
    assert result[3].end == pytest.approx(2.1)
    assert result[5].start == pytest.approx(2.4) and result[5].end == pytest.approx(3.0)
    check_timings([t.word for t in result], result)


def test_interpolate_never_invents_times_without_an_anchor():
    timings = [WordTiming("a", NAN, NAN, False), WordTiming("b", NAN, NAN, False)]
    assert all(math.isnan(t.start) and math.isnan(t.end) for t in interpolate(timings, 5.0))
    mixed = [WordTiming("a", NAN, NAN, False), WordTiming("b", 1.0, 2.0, True)]
    assert math.isnan(interpolate(mixed, 5.0, mode="nan")[0].start)


def test_check_timings_rejects_dropped_reordered_or_bad_entries():
    good = [WordTiming("a", 0.1, 0.2, True), WordTiming("b", 0.2, 0.4, True)]
    check_timings(["a", "b"], good)
    with pytest.raises(RuntimeError):
        check_timings(["a", "b", "c"], good)
    with pytest.raises(RuntimeError):
        check_timings(["b", "a"], good)
    with pytest.raises(RuntimeError):
        check_timings(["a"], [WordTiming("a", 0.3, 0.2, True)])
    with pytest.raises(RuntimeError):
        check_timings(["a"], [WordTiming("a", NAN, NAN, True)])
