"""A longer draw of training text: the prepare stage's seeded draw of talks run on to more tokens, and its word
features (stage ``draw@NAME``, params ``draws``).

:func:`trainset.prepare.prepare_data` takes talks in one seeded order until ``train_tokens``; drawn on to twice as
many, the first talks are the default set's (its last one, cut at a sentence end there, whole here) and the rest
follow, with the same exclusions (overlap with dev, the test sets and the real-speech talks; the held-out talks).
The evaluation splits are the same words. A model that reads such a draw sees more text in the same steps instead
of the same text twice (reports/asr_levers/levers.md, ``fresh_data``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainset.from_params import prepare_from_params

#: the folders of a draw under its directory: the prepared words (as ``data/prepared``) and their word features
#: (as ``data/features``)
PREPARED_DIR, FEATURES_DIR = "prepared", "features"


def draw_features(data: Mapping[str, Any], embed: Mapping[str, Any], train_tokens: int, out_dir: str | Path) -> Path:
    """The word features of params' ``data`` drawn to ``train_tokens`` training tokens, with the word source of
    params' ``embed`` (its ``word_source``, ``oov``, ``vocab_min_count``): ``out_dir/features``, the words in
    ``out_dir/prepared``. The words are drawn every time (half a minute for 4M tokens: no stale draw is ever
    read); the features are rebuilt only when those words or the word source changed (their content is the cache's
    key: :func:`embeddings.cache.build_feature_cache`)."""
    from embeddings.cache import build_feature_cache

    out_dir = Path(out_dir)
    prepare_from_params(data, out_dir / PREPARED_DIR, train_tokens=train_tokens)
    return Path(build_feature_cache(out_dir / PREPARED_DIR, out_dir / FEATURES_DIR, word_source=embed["word_source"],
                                    oov=embed["oov"], vocab_min_count=int(embed.get("vocab_min_count", 1))).root)
