"""Word-vector sources and the per-token feature cache (see embeddings/README.md)."""

from embeddings.cache import (
    CACHE_FORMAT,
    OOV_POLICIES,
    PAD,
    PAD_ID,
    UNK,
    UNK_ID,
    CachePaths,
    EmbeddedTokens,
    FeatureCacheError,
    SourceMismatchError,
    SplitFeatures,
    TokenEmbedder,
    build_feature_cache,
    build_vocab,
    load_split,
    read_manifest,
)
from embeddings.sources import SOURCE_TYPES, SourceSpecError, load_word_vectors, source_fingerprint

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
    "build_feature_cache",
    "build_vocab",
    "load_split",
    "load_word_vectors",
    "read_manifest",
    "source_fingerprint",
]
