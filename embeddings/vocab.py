"""The vocabulary and the lookup rules for words a source lacks: ids, fallbacks and OOV vectors.

Everything here is part of the cache's content: changing a rule must bump ``embeddings.store.CACHE_FORMAT``.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
OOV_POLICIES: tuple[str, ...] = ("zero", "random", "mean")

#: Salt of the per-word seed of ``random`` OOV vectors (changing it changes every random vector).
_RANDOM_SALT = b"embeddings.oov.random/v1\0"
#: A run of mangled bytes at the start of a token: U+FFFD (or surrogate-escaped bytes), optionally followed by
#: the '?' that replaced the last byte of the original character (e.g. b"\xe2\x99?" = a broken music note).
_MANGLED_PREFIX = re.compile("^(?:[\ufffd\udc80-\udcff]+\\??)+")


def build_vocab(words: Iterable[str], min_count: int = 1) -> list[str]:
    """``[<pad>, <unk>, *types]``: word types seen at least ``min_count`` times, most frequent first, ties
    alphabetical. The list index is the token id."""
    if min_count < 1:
        raise ValueError(f"vocab min_count must be >= 1, got {min_count}")
    counts = Counter(words)
    types = [w for w, c in counts.items() if c >= min_count and w not in (PAD, UNK)]
    types.sort(key=lambda w: (-counts[w], w))
    return [PAD, UNK, *types]


def vocab_sha256(vocab: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(vocab).encode("utf-8", "surrogatepass")).hexdigest()


def check_policy(oov: str) -> None:
    """Raise ``ValueError`` naming the policies for an unknown OOV policy."""
    if oov not in OOV_POLICIES:
        raise ValueError(f"unknown OOV policy {oov!r}; expected one of {list(OOV_POLICIES)}")


def fallback_key(word: str) -> str | None:
    """The lookup fallback tried when ``word`` itself is not in the source: the word with a mangled-byte
    prefix removed (``"\\ufffd?gimme"`` -> ``"gimme"``); None when there is no such prefix."""
    stripped = _MANGLED_PREFIX.sub("", word)
    return stripped if stripped and stripped != word else None


def clitic_parts(word: str) -> tuple[str, str] | None:
    """``("we", "'ve")`` for a contraction the benchmark leaves whole (``we've``, ``i'd``, ``it’s``).

    The benchmark splits only some clitics (``n't``, ``'s``, ``'m``, ``'re``, ``'ll``) into tokens of their own;
    ``'ve`` and ``'d`` stay attached, and GloVe has no vector for such words. Their vector is then the mean of
    the two parts' vectors (both must be in the source), which is what the split form would have carried.
    """
    word = word.replace("\u2019", "'")
    cut = word.rfind("'")
    if cut <= 0 or cut == len(word) - 1:
        return None
    return word[:cut], word[cut:]


def random_oov_vector(word: str, dim: int, sigma: float) -> np.ndarray:
    """The ``random`` policy's vector for ``word``: N(0, sigma^2) per dimension, float32, from a generator
    seeded with sha256(salt + UTF-8 word): the same in every process, run and machine."""
    seed = int.from_bytes(hashlib.sha256(_RANDOM_SALT + word.encode("utf-8", "surrogatepass")).digest()[:16], "little")
    rng = np.random.Generator(np.random.PCG64(seed))
    return (rng.standard_normal(dim) * sigma).astype(np.float32)
