"""The speech engines called through ctypes (audio/engines.py); skipped without them."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from audio.engines import engine_available, get_engine

needs_flite = pytest.mark.skipif(not engine_available("flite"), reason="flite is not installed (apt-get install flite)")


@needs_flite
def test_flite_library_timings_are_the_psdur_timings(tmp_path):
    if shutil.which("flite") is None:
        pytest.skip("flite command line tool not on PATH")
    text = "well, i don't know. it's fine?"
    output = get_engine("flite").synthesize(text.split(), voice="slt", rate=1.0, pitch=1.0)
    ours = [round(s.end / output.sample_rate, 3) for words in output.tokens for _, segs in words for s in segs]
    printed = subprocess.run(
        ["flite", "-voice", "slt", "-psdur", "-t", text, "-o", str(tmp_path / "x.wav")],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    theirs = [float(item.rsplit(":", 1)[1]) for item in printed if not item.startswith("pau:")]
    assert ours == pytest.approx(theirs, abs=1.5e-3)  # -psdur prints 3 decimals


def test_an_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="unknown engine"):
        get_engine("festival")


@needs_flite
def test_an_utterance_sounds_the_same_whatever_was_synthesised_before_it():
    """flite's voices draw random numbers; seeded per utterance, a resumed synthesize stage makes the bytes an
    uninterrupted one makes."""
    import numpy as np

    engine = get_engine("flite")
    words = "so the river was cold and nobody came".split()
    first = engine.synthesize(words, voice="awb", rate=1.0, pitch=1.0)
    engine.synthesize("a different sentence with other sounds in it".split(), voice="kal16", rate=1.1, pitch=1.05)
    again = engine.synthesize(words, voice="awb", rate=1.0, pitch=1.0)
    assert np.array_equal(first.audio, again.audio)
