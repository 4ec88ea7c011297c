"""Word-vector sources and the per-token feature cache (see embeddings/README.md).

* :mod:`embeddings.sources` -- word-vector sources (spec, loading, content fingerprint);
* :mod:`embeddings.speech_sources` -- speech sources and how they combine with the word vectors;
* :mod:`embeddings.vocab` -- the vocabulary and the OOV rules;
* :mod:`embeddings.embedder` -- :class:`TokenEmbedder`, the token lookup shared by the cache and ``punctuate``;
* :mod:`embeddings.table` -- :class:`VectorTable`, the vectors a saved embedder carries (memory-mapped);
* :mod:`embeddings.cache` -- building the feature cache; :mod:`embeddings.store` -- its layout and reading it;
* :mod:`embeddings.directories` -- swapping a finished directory in; :mod:`embeddings.pack` -- moving a cache;
* :mod:`embeddings.speech2vec`, :mod:`embeddings.evaluation` -- Speech2Vec and what vectors carry.
"""

from embeddings.cache import CachePaths, build_feature_cache
from embeddings.embedder import EmbeddedTokens, TokenEmbedder
from embeddings.sources import SOURCE_TYPES, SourceSpecError, load_word_vectors, source_fingerprint
from embeddings.store import (
    CACHE_FORMAT,
    FeatureCacheError,
    SourceMismatchError,
    SplitFeatures,
    load_split,
    load_split_words,
    read_manifest,
)
from embeddings.table import VectorTable
from embeddings.vocab import OOV_POLICIES, PAD, PAD_ID, UNK, UNK_ID, build_vocab

__all__ = [
    "CACHE_FORMAT",
    "OOV_POLICIES",
    "PAD",
    "PAD_ID",
    "SOURCE_TYPES",
    "UNK",
    "UNK_ID",
    "CachePaths",
    "EmbeddedTokens",
    "FeatureCacheError",
    "SourceMismatchError",
    "SourceSpecError",
    "SplitFeatures",
    "TokenEmbedder",
    "VectorTable",
    "build_feature_cache",
    "build_vocab",
    "load_split",
    "load_split_words",
    "load_word_vectors",
    "read_manifest",
    "source_fingerprint",
]
