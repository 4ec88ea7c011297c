"""Speech synthesis with engine word timings (audio/synthesis.py over audio/engines.py and audio/spoken.py).

Tiny texts; skipped without the engines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

soundfile = pytest.importorskip("soundfile", reason="soundfile is not installed (pip install soundfile)")
pytest.importorskip("librosa", reason="librosa is not installed (pip install librosa)")

from audio.engines import engine_available  # noqa: E402
from audio.synthesis import synthesize_talk, synthesize_talks, talk_stem  # noqa: E402
from corpus.timings import WordTiming  # noqa: E402
from corpus.timings import read_engine_timings as read_timings  # noqa: E402
from corpus.timings import write_engine_timings as write_timings  # noqa: E402

HAS_FLITE = engine_available("flite")
HAS_ESPEAK = engine_available("espeak-ng")
needs_flite = pytest.mark.skipif(not HAS_FLITE, reason="flite is not installed (apt-get install flite)")
needs_espeak = pytest.mark.skipif(not HAS_ESPEAK, reason="espeak-ng is not installed (apt-get install espeak-ng)")

# "well, i do n't know. it 's fine? -- the end."
WORDS = "well i do n't know it 's fine -- the end".split()
LABELS = ["COMMA", "O", "O", "O", "PERIOD", "O", "O", "QUESTION", "O", "O", "PERIOD"]


@dataclass
class FakeTalk:
    talk_id: str
    words: tuple[str, ...]
    labels: tuple[str, ...]


def _check_output(result, words):
    info = soundfile.info(str(result.wav))
    assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
    assert info.frames / 16000 == pytest.approx(result.duration, abs=1e-4)
    timings = result.word_timings
    assert [t.word for t in timings] == list(words)
    aligned = [t for t in timings if t.aligned]
    for t in timings:
        assert 0.0 <= t.start <= t.end <= result.duration + 1e-6
    starts = [t.start for t in aligned]
    assert starts == sorted(starts)
    for before, after in zip(aligned, aligned[1:]):
        assert before.end <= after.start + 1e-6  # spans do not overlap
    assert read_timings(result.timings_path) == [
        WordTiming(t.word, round(t.start, 6), round(t.end, 6), t.aligned, t.source) for t in timings
    ]
    return timings


def _pause_after(timings, index):
    following = next(t for t in timings[index + 1 :] if t.aligned)
    return following.start - timings[index].end


@needs_flite
def test_flite_16k_mono_timings_and_punctuation_cues(tmp_path):
    punctuated = synthesize_talk(WORDS, LABELS, tmp_path / "p.wav", engine="flite", voice="slt", punctuated=True)
    bare = synthesize_talk(WORDS, LABELS, tmp_path / "u.wav", engine="flite", voice="slt", punctuated=False)
    for result in (punctuated, bare):
        timings = _check_output(result, WORDS)
        silent = [t for t in timings if not t.aligned]
        assert [t.word for t in silent] == ["--"] and silent[0].source == "silent"
        # Clitics: contiguous with their host, taken from the engine's phones.
        do, nt = timings[2], timings[3]
        assert do.end == pytest.approx(nt.start) and nt.end > nt.start and nt.source == "clitic_rule"
        assert timings[6].source == "engine"  # flite makes 's a word of its own
    # The control condition has no marks, so no pause after "know" (PERIOD) or "well" (COMMA).
    p, u = punctuated.word_timings, bare.word_timings
    assert _pause_after(p, 4) > 0.1 > _pause_after(u, 4) + 0.05
    assert _pause_after(p, 0) > _pause_after(u, 0) + 0.05
    assert punctuated.duration > bare.duration
    # Inside word spans there is speech, in the pause after a PERIOD there is (near) silence.
    audio, _ = soundfile.read(str(punctuated.wav))
    know, it = p[4], p[5]
    gap = audio[int(know.end * 16000) + 80 : int(it.start * 16000) - 80]
    word = audio[int(know.start * 16000) : int(know.end * 16000)]
    assert np.sqrt(np.mean(gap**2)) < 0.1 * np.sqrt(np.mean(word**2))



@needs_flite
def test_chunked_synthesis_keeps_exact_offsets(tmp_path):
    sentences = [["this", "is", "one"], ["and", "here", "is", "two"], ["three", "ends", "it"]]
    words = [w for s in sentences for w in s]
    labels = [l for s in sentences for l in ["O"] * (len(s) - 1) + ["PERIOD"]]
    # kal16 (a diphone voice) is deterministic; the clustergen voices (slt, awb, rms) add random noise.
    whole = synthesize_talk(words, labels, tmp_path / "w.wav", engine="flite", voice="kal16", punctuated=True,
                            max_chunk_tokens=4)
    assert whole.chunks == 3
    _check_output(whole, words)
    alone = synthesize_talk(sentences[1], ["O", "O", "O", "PERIOD"], tmp_path / "a.wav", engine="flite",
                            voice="kal16", punctuated=True)
    # The second sentence inside the talk is the same engine output, shifted by a whole number of samples.
    inside = whole.word_timings[3:7]
    shift = inside[0].start - alone.word_timings[0].start
    for a, b in zip(inside, alone.word_timings):
        assert a.start - b.start == pytest.approx(shift, abs=1e-6)
        assert a.end - b.end == pytest.approx(shift, abs=1e-6)
    big, _ = soundfile.read(str(whole.wav), dtype="int16")
    small, _ = soundfile.read(str(alone.wav), dtype="int16")
    s0, s1 = round(alone.word_timings[0].start * 16000), round(alone.word_timings[-1].end * 16000)
    offset = round(shift * 16000)
    assert np.array_equal(big[s0 + offset : s1 + offset], small[s0:s1])
    # Unpunctuated chunks are joined phone to phone: no silence between the chunks' words.
    bare = synthesize_talk(words, labels, tmp_path / "b.wav", engine="flite", voice="slt", punctuated=False,
                           max_chunk_tokens=4, seed=3)
    assert bare.chunks >= 2
    _check_output(bare, words)
    timings = bare.word_timings
    assert max(b.start - a.end for a, b in zip(timings, timings[1:])) < 0.05


@needs_flite
def test_rate_pitch_and_resampled_voice(tmp_path):
    slow = synthesize_talk(WORDS, LABELS, tmp_path / "s.wav", engine="flite", voice="kal", rate=0.8,
                           punctuated=True)  # kal speaks at 8 kHz: resampled
    fast = synthesize_talk(WORDS, LABELS, tmp_path / "f.wav", engine="flite", voice="kal", rate=1.25,
                           punctuated=True)
    _check_output(slow, WORDS)
    assert slow.settings["engine_sample_rate"] == 8000
    assert slow.duration > 1.3 * fast.duration


@needs_espeak
def test_espeak_timings(tmp_path):
    result = synthesize_talk(WORDS, LABELS, tmp_path / "e.wav", engine="espeak-ng", voice="en-us",
                             punctuated=True)
    timings = _check_output(result, WORDS)
    assert result.settings["engine_sample_rate"] == 22050
    assert sum(t.aligned for t in timings) == len(WORDS) - 1
    bare = synthesize_talk(WORDS, LABELS, tmp_path / "u.wav", engine="espeak-ng", voice="en-us",
                           punctuated=False)
    assert _pause_after(timings, 4) > _pause_after(bare.word_timings, 4) + 0.1
    # espeak-ng says "in the" as one word; the phones are shared out, the spans stay contiguous.
    joined = synthesize_talk(["we", "are", "in", "the", "field"], ["O"] * 4 + ["PERIOD"], tmp_path / "j.wav",
                             engine="espeak-ng", voice="en-us", punctuated=True).word_timings
    assert [t.source for t in joined[2:4]] == ["join_rule", "join_rule"] and all(t.aligned for t in joined)
    assert joined[2].end == joined[3].start and joined[3].end > joined[3].start
    # The engine's spans hold the speech: louder inside words than in the gaps between them.
    audio, _ = soundfile.read(str(result.wav))
    inside = np.zeros(len(audio), bool)
    for t in timings:
        inside[int(t.start * 16000) : int(t.end * 16000)] = True
    assert np.sqrt(np.mean(audio[inside] ** 2)) > 5 * np.sqrt(np.mean(audio[~inside] ** 2))


@needs_flite
def test_synthesize_talks_resumes_redoes_and_records_failures(tmp_path):
    talks = [
        FakeTalk("t1", ("hello", "there"), ("COMMA", "PERIOD")),
        FakeTalk("t/2", ("good", "morning", "to", "you"), ("O", "PERIOD", "O", "QUESTION")),
        FakeTalk("bad", ("--", "/seg"), ("O", "PERIOD")),  # nothing to say
    ]
    kwargs = dict(voices=["flite:slt", "flite:kal16"], rate_range=(0.9, 1.1), pitch_range=(0.9, 1.1),
                  punctuated=True, seed=7)
    first = synthesize_talks(talks, tmp_path, **kwargs)
    assert first["done"] == 2 and first["skipped"] == 0
    assert [f["talk"] for f in first["failed"]] == ["bad"] and "nothing to say" in first["failed"][0]["error"]
    stem = talk_stem("t/2")
    assert stem != "t/2" and (tmp_path / f"{stem}.wav").is_file() and (tmp_path / f"{stem}.timings.tsv").is_file()
    written = json.loads((tmp_path / "synthesis_report.json").read_text())
    assert written["ok"] == 2 and {row["status"] for row in written["per_talk"]} == {"ok", "failed"}
    assert "done" not in written and "compute_seconds" not in written  # the same bytes whichever run made it
    settings = {r["talk"]: (r["voice"], r["rate"], r["pitch"]) for r in first["per_talk"] if r["status"] == "done"}
    for voice, rate, pitch in settings.values():
        assert voice in {"slt", "kal16"} and 0.9 <= rate <= 1.1 and 0.9 <= pitch <= 1.1

    again = synthesize_talks(talks, tmp_path, **kwargs)
    assert again["done"] == 0 and again["skipped"] == 2 and len(again["failed"]) == 1
    assert json.loads((tmp_path / "synthesis_report.json").read_text()) == written  # a resumed run writes the same
    skipped = {r["talk"]: (r["voice"], r["rate"], r["pitch"]) for r in again["per_talk"] if r["status"] == "skipped"}
    assert skipped == settings

    # An incomplete output (truncated WAV) is redone; the other talk is still skipped.
    wav = tmp_path / "t1.wav"
    wav.write_bytes(wav.read_bytes()[:1000])
    third = synthesize_talks(talks[:2], tmp_path, **kwargs)
    assert (third["done"], third["skipped"]) == (1, 1)
    assert soundfile.info(str(wav)).frames > 1000

    # Changed settings redo every talk.
    fourth = synthesize_talks(talks[:2], tmp_path, **{**kwargs, "punctuated": False})
    assert (fourth["done"], fourth["skipped"]) == (2, 0)


def test_timings_round_trip_and_stems(tmp_path):
    timings = [WordTiming("a", 0.0, 0.5, True), WordTiming("#1\tb", 0.5, 0.5, False, "silent")]
    path = write_timings(tmp_path / "x.timings.tsv", timings)
    assert read_timings(path) == [timings[0], WordTiming("#1 b", 0.5, 0.5, False, "silent")]
    assert talk_stem("1169") == "1169"
    assert talk_stem("Cameron_Herold_Let's_raise_kids") != talk_stem("Cameron_Herold_Lets_raise_kids")
    assert "/" not in talk_stem("a/b") and "'" not in talk_stem("it's")
