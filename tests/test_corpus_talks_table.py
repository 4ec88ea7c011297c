"""The talks table (corpus/talks_table.py) and the ragged MFCC store's split files (corpus/frames.py)."""

from __future__ import annotations

import numpy as np
import pytest

from corpus.frames import FRAMES_FILE, OFFSETS_FILE, RaggedFrames
from corpus.talks_table import TALK_COLUMNS, read_talks_table, write_talks_table


def test_talks_table_round_trip(tmp_path):
    rows = [
        {"talk": "101", "split": "ref", "first_token": 0, "tokens": 12, "wav": "ref/101.wav", "duration_s": 4.25,
         "voice": "flite:slt", "rate": 0.95, "pitch": 1.0, "status": "ok", "action": "made"},
        {"talk": "x", "split": "train", "first_token": 12, "tokens": 3, "status": "failed", "error": "a\tb\nc"},
    ]
    path = write_talks_table(tmp_path / "talks.tsv", rows)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == list(TALK_COLUMNS)
    assert lines[1].split("\t")[5:8] == ["4.250000", "flite:slt", "0.95"]
    read = read_talks_table(path)
    assert read[0] == {**{column: None for column in TALK_COLUMNS}, **rows[0], "pitch": 1.0}
    assert read[1]["error"] == "a b c" and read[1]["wav"] is None and read[1]["duration_s"] is None
    (tmp_path / "bad.tsv").write_text("talk\tsplit\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not a talks table"):
        read_talks_table(tmp_path / "bad.tsv")


def test_frames_split_files_are_the_store(tmp_path):
    store = RaggedFrames(np.arange(12, dtype=np.float32).reshape(6, 2), np.array([0, 2, 2, 6]))
    np.save(tmp_path / FRAMES_FILE, store.values)
    np.save(tmp_path / OFFSETS_FILE, store.offsets)
    loaded = RaggedFrames(np.load(tmp_path / FRAMES_FILE, mmap_mode="r"), np.load(tmp_path / OFFSETS_FILE))
    assert len(loaded) == 3 and len(loaded.token(1)) == 0 and np.array_equal(loaded.token(2), store.token(2))
