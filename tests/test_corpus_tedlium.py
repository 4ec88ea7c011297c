"""corpus.tedlium: TED-LIUM's layout and STM segments, and matching its recordings to the TED transcripts by speaker
name, confirmed by text."""

from __future__ import annotations

import pytest

from corpus.tedlium import (TedliumFormatError, find_tedlium, match_talks, name_keys, read_stm, speaker_key,
                            text_overlap)

STM = """;; comment
AlGore_2006 1 AlGore_2006 0.00 1.20 <o,f0,male> {NOISE} thank you so much chris
AlGore_2006 1 inter_segment_gap 1.20 1.90 <o,,unknown> ignore_time_segment_in_scoring
AlGore_2006 1 AlGore_2006 1.90 4.33 <o,f0,male> it 's truly a <unk> honor i don 't know
AlGore_2006 1 AlGore_2006 4.33 5.00 <o,f0,male> ignore_time_segment_in_scoring
AlGore_2006 1 AlGore_2006 5.00 6.00 they said (2) [laughter] yes
"""


def test_stm_segments_skip_ignored_time_and_non_speech(tmp_path):
    path = tmp_path / "AlGore_2006.stm"
    path.write_text(STM, encoding="utf-8")
    segments = read_stm(path)
    assert [(s.start, s.end) for s in segments] == [(0.0, 1.2), (1.9, 4.33), (5.0, 6.0)]
    assert segments[0].words == ("thank", "you", "so", "much", "chris") and segments[0].label == "<o,f0,male>"
    assert segments[1].words == ("it", "'s", "truly", "a", "honor", "i", "don", "'t", "know")
    assert segments[2].label == "" and segments[2].words == ("they", "said", "yes")
    assert segments[1].timed().words == segments[1].words
    path.write_text(STM + "AlGore_2006 1 AlGore_2006 oops 7.0 words\n", encoding="utf-8")
    with pytest.raises(TedliumFormatError, match=r"AlGore_2006\.stm:7: start/end"):
        read_stm(path)
    path.write_text("AlGore_2006 1 AlGore_2006 3.0\n", encoding="utf-8")
    with pytest.raises(TedliumFormatError, match=r":1: expected 'talk channel speaker start end"):
        read_stm(path)
    path.write_text("AlGore_2006 1 AlGore_2006 3.0 2.0 words\n", encoding="utf-8")
    with pytest.raises(TedliumFormatError, match="not a span of time"):
        read_stm(path)


def test_the_layout_the_release_root_and_files_without_their_pair(tmp_path):
    with pytest.raises(TedliumFormatError, match="not a TED-LIUM folder"):
        find_tedlium(tmp_path)
    data = tmp_path / "TEDLIUM_release-3" / "data"
    for folder in ("sph", "stm"):
        (data / folder).mkdir(parents=True)
    for name in ("AlGore_2006", "AmySmith_2006", "OnlyAudio_2001"):
        (data / "sph" / f"{name}.sph").write_bytes(b"NIST_1A")
    for name in ("AlGore_2006", "AmySmith_2006", "OnlyText_2002"):
        (data / "stm" / f"{name}.stm").write_text("", encoding="utf-8")
    for root in (tmp_path / "TEDLIUM_release-3", data):
        talks, problems = find_tedlium(root)
        assert [t.talk_id for t in talks] == ["AlGore_2006", "AmySmith_2006"]
        assert talks[0].sph == data / "sph" / "AlGore_2006.sph" and talks[0].stm == data / "stm" / "AlGore_2006.stm"
        assert len(problems) == 2 and "OnlyAudio_2001.sph: no STM file" in problems[0]
        assert "OnlyText_2002.stm: no audio file" in problems[1]


def test_speaker_keys_from_ids_and_names():
    assert speaker_key("AlGore_2006") == "algore"
    assert speaker_key("AshrafGhani_2005G") == "ashrafghani"
    assert speaker_key("NgoziOkonjoIweala_2007") == "ngoziokonjoiweala"
    assert speaker_key("Bono") == "bono"
    assert {"algore", "gore", "averting"} <= name_keys("Averting_the_climate_crisis_Al_Gore")
    assert "amysmith" in name_keys("Amy_Smith_Simple_designs_that_could_save_millions_of_childrens'_lives")
    assert "ngoziokonjoiweala" in name_keys("Ngozi_Okonjo-Iweala_on_aid_versus_trade")
    assert "danieltammet" in name_keys("Daniel Tammet: Different ways of knowing")
    assert "josedelgado" in name_keys("José_Delgado_talk")


GORE_2006 = "thank you so much chris it 's truly a great honor to have the opportunity to come to this stage twice"
GORE_2008 = "the climate crisis is getting worse we have to act now and we can solve it together if we try"
TRANSCRIPTS = {
    "Averting_the_climate_crisis_Al_Gore": ("Thank you so much, Chris. It's truly a great honor to have the opportunity "
                                            "to come to this stage twice.").split(),
    "Al_Gore_New_thinking_on_the_climate_crisis": ("The climate crisis is getting worse. We have to act now, and we can "
                                                   "solve it together if we try.").split(),
    "Amy_Smith_Simple_designs": "Two million people die every year from the smoke of cooking fires.".split(),
}


def test_a_speakers_talks_are_told_apart_by_their_text():
    recordings = {"AlGore_2006": GORE_2006.split(), "AlGore_2008": GORE_2008.split()}
    matching = match_talks(recordings, TRANSCRIPTS, min_overlap=0.3)
    assert matching.matches["AlGore_2006"][0] == "Averting_the_climate_crisis_Al_Gore"
    assert matching.matches["AlGore_2008"][0] == "Al_Gore_New_thinking_on_the_climate_crisis"
    assert matching.matches["AlGore_2006"][1] > 0.8 and not matching.unmatched
    assert matching.transcripts_unmatched == ["Amy_Smith_Simple_designs"]
    assert matching.by_transcript()["Averting_the_climate_crisis_Al_Gore"][0] == "AlGore_2006"
    assert text_overlap(GORE_2006.split(), TRANSCRIPTS["Al_Gore_New_thinking_on_the_climate_crisis"]) == 0.0


def test_every_unmatched_recording_is_reported_with_its_reason():
    recordings = {
        "AlGore_2006": GORE_2006.split(),
        "AlGore_2006B": GORE_2006.split()[:-3],  # a second copy of the same talk: loses to the fuller one
        "AmySmith_2009": "nothing of this was ever said in her talk about cooking".split(),
        "NobodyKnown_2010": "some words".split(),
        "Silent_2001": ["{NOISE}"][:0],
    }
    matching = match_talks(recordings, TRANSCRIPTS, min_overlap=0.3)
    assert set(matching.matches) == {"AlGore_2006"}
    reasons = matching.unmatched
    assert "went to AlGore_2006" in reasons["AlGore_2006B"]
    assert "the text of no transcript named after 'amysmith' matches" in reasons["AmySmith_2009"]
    assert "Amy_Smith_Simple_designs (0.00)" in reasons["AmySmith_2009"]
    assert reasons["NobodyKnown_2010"] == "no transcript is named after the speaker 'nobodyknown'"
    assert reasons["Silent_2001"] == "its STM has no words"
    report = matching.to_dict()
    assert report["matched"] == 1 and [r["recording"] for r in report["recordings_unmatched"]] == sorted(reasons)


def test_a_tie_is_not_guessed_and_names_come_from_elsewhere_when_given():
    transcripts = {"a": TRANSCRIPTS["Averting_the_climate_crisis_Al_Gore"],
                   "b": TRANSCRIPTS["Averting_the_climate_crisis_Al_Gore"], "c": ["unnamed"]}
    names = {"a": "Al Gore: Averting the climate crisis", "b": "Al_Gore_again"}
    matching = match_talks({"AlGore_2006": GORE_2006.split()}, transcripts, names=names, min_overlap=0.3)
    assert "two transcripts match equally well" in matching.unmatched["AlGore_2006"]
    with pytest.raises(ValueError, match="min_overlap"):
        match_talks({}, {}, min_overlap=0)
