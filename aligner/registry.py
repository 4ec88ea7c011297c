"""Alignment backends by name, and the :func:`align` entry point."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Protocol

from aligner.mfa_backend import MfaBackend
from aligner.pocketsphinx_backend import PocketsphinxBackend
from aligner.timing import check_timings
from aligner.types import AlignConfig, PoorAlignmentError, WordTiming, placement_problem, too_few_placed

__all__ = ["Backend", "DEFAULT_BACKEND", "register_backend", "get_backend", "backend_names", "align"]

DEFAULT_BACKEND = "pocketsphinx"


class Backend(Protocol):
    name: str

    def is_available(self) -> bool: ...

    def align(self, audio_path: str | os.PathLike, words: Sequence[str], *,
              config: AlignConfig) -> list[WordTiming]: ...


_FACTORIES: dict[str, Callable[[], Backend]] = {}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make ``factory()`` the backend called ``name`` (replacing any earlier one)."""
    _FACTORIES[name] = factory


def backend_names() -> list[str]:
    return sorted(_FACTORIES)


def get_backend(name: str = DEFAULT_BACKEND) -> Backend:
    """The backend registered as ``name``; ``KeyError`` listing the known names otherwise."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise KeyError(f"unknown alignment backend {name!r}; known: {', '.join(backend_names())}") from None
    return factory()


def align(audio_path: str | os.PathLike, words: Sequence[str], *, config: AlignConfig | None = None,
          backend: str = DEFAULT_BACKEND) -> list[WordTiming]:
    """Align ``words`` (benchmark tokens, in spoken order) to the audio file with the named backend.

    Returns one :class:`WordTiming` per word, in order (unaligned words: ``aligned=False``, see
    :class:`WordTiming`). Raises :class:`aligner.AudioError` for unusable audio,
    :class:`aligner.BackendUnavailable` when the backend is not installed, and
    :class:`aligner.PoorAlignmentError` when ``config.min_placed_share`` is set and no more than that share of
    the words was placed (:func:`aligner.types.too_few_placed`).
    """
    chosen = get_backend(backend)  # each backend raises BackendUnavailable itself (it knows its config)
    config = config or AlignConfig()
    words = [str(word) for word in words]
    timings = chosen.align(audio_path, words, config=config)
    check_timings(words, timings)
    placed = sum(bool(timing.aligned) for timing in timings)
    if too_few_placed(placed, len(words), config.min_placed_share):
        raise PoorAlignmentError(placement_problem(audio_path, placed, len(words))
                                 + f"; below min_placed_share {config.min_placed_share}", placed=placed,
                                 total=len(words))
    return timings


def _register_builtin() -> None:
    register_backend("pocketsphinx", PocketsphinxBackend)
    register_backend("mfa", MfaBackend)


_register_builtin()
