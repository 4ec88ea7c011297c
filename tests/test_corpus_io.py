"""corpus.io: atomic writes leave the old file or the new one, never a part, and the usual file mode."""

from __future__ import annotations

import os
import stat

import pytest

from corpus.io import atomic_path, atomic_write_bytes, atomic_write_text


def test_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    atomic_write_text(target, "one\n")
    atomic_write_text(target, "two\n")
    assert target.read_text() == "two\n"
    assert os.listdir(target.parent) == ["out.txt"]


def test_a_failed_write_keeps_the_previous_file(tmp_path):
    target = tmp_path / "out.bin"
    atomic_write_bytes(target, b"good")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as temporary:
            temporary.write_bytes(b"half")
            raise RuntimeError("killed mid-write")
    assert target.read_bytes() == b"good"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_the_file_gets_the_mode_a_plain_open_would_give(tmp_path):
    mask = os.umask(0o027)
    try:
        path = atomic_write_text(tmp_path / "a.txt", "x")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_two_writers_of_one_target_use_different_temporary_names(tmp_path):
    target = tmp_path / "same.txt"
    with atomic_path(target) as first, atomic_path(target) as second:
        assert first != second
        first.write_text("a")
        second.write_text("b")
    assert target.read_text() in {"a", "b"}


def test_suffix_keeps_the_extension_writers_choose_a_format_by(tmp_path):
    with atomic_path(tmp_path / "x.npz", suffix=".npz") as temporary:
        assert temporary.name.endswith(".npz")
        temporary.write_bytes(b"")
