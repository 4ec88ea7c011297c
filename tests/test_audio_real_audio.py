"""Real recordings in place of synthesis (audio/real_audio.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

soundfile = pytest.importorskip("soundfile", reason="soundfile is not installed (pip install soundfile)")

from audio.real_audio import AudioInputError, use_real_audio  # noqa: E402


def talk(talk_id: str) -> SimpleNamespace:
    """Stands in for a :class:`corpus.talks.Talk` (only its ``talk_id`` is read)."""
    return SimpleNamespace(talk_id=talk_id)


def test_use_real_audio(tmp_path):
    soundfile.write(tmp_path / "1169.wav", np.zeros((4410, 2), np.float32), 44100)
    (tmp_path / "1175.wav").write_bytes(b"not audio at all")
    found = use_real_audio(tmp_path, ["1169"])
    assert found[0].duration == pytest.approx(0.1) and (found[0].sample_rate, found[0].channels) == (44100, 2)
    with pytest.raises(AudioInputError) as error:
        use_real_audio(tmp_path, [talk("1169"), talk("1175"), talk("1178")])
    message = str(error.value)
    assert "2 of 3" in message and "1175.wav: unreadable" in message and "1178.wav: missing" in message
