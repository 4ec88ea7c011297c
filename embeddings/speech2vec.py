"""Speech2Vec (Chung & Glass, 2018) learned from force-aligned word segments.

Each word occurrence with audio is a segment of MFCC frames (the ``features`` stage stores them per token,
``data/acoustic/<split>/mfcc*.npy``). A bidirectional GRU encodes a segment into a fixed vector (``dim``, 50
by default); a GRU decoder, initialised from that vector and told which neighbour it is asked for, reconstructs
the MFCC frames of a neighbouring segment (skip-gram: a neighbour within a window drawn uniformly from 1 to
``window`` on either side, inside the same talk). The decoder attends over the encoder's frame states (Luong
style, after its recurrence); that path carries how the centre word was said (speaker, channel), which leaves
the fixed vector free for what predicts the neighbours. Frequent words are subsampled as in word2vec (keep
probability ``sqrt(t / f) + t / f``) and words seen fewer than ``min_count`` times are dropped.

Outputs of :func:`train_speech2vec`:

* ``vectors.txt``: the vector of each word type, the mean of the embeddings of its segments in the training
  audio (word2vec text format; gensim's ``KeyedVectors.load_word2vec_format`` reads it);
* ``occurrences/<split>/{index,vectors}.npy``: one embedding per token *with audio* in every split (the
  positions in the split's token sequence and their vectors): how the word was said at that spot, which the
  type-level mean averages away;
* ``model.pt`` (weights, MFCC normalisation, config) and ``speech2vec.json`` (what it was trained on, losses,
  timings).

Only the ``train_splits`` audio trains the model and makes the type-level vectors; the per-occurrence
vectors of the other splits are the trained encoder applied to their segments (no labels are involved).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from corpus.frames import FRAMES_FILE, OFFSETS_FILE
from corpus.io import atomic_path
from corpus.iwslt import read_iwslt
from corpus.talks_table import read_talks_table

log = logging.getLogger(__name__)

VECTORS_FILE = "vectors.txt"
MODEL_FILE = "model.pt"
SUMMARY_FILE = "speech2vec.json"
OCCURRENCES_DIR = "occurrences"
FORMAT_VERSION = 1


class Speech2VecError(ValueError):
    """Unusable input for Speech2Vec (no segments, mismatched token files, bad settings)."""


@dataclass(frozen=True)
class Speech2VecConfig:
    dim: int = 50                 # the word vector
    encoder_hidden: int = 128     # per direction
    decoder_hidden: int = 128
    attention: bool = True        # decoder attends over the centre segment's encoder states
    window: int = 3               # skip-gram window (neighbours on each side)
    min_count: int = 3            # words with fewer training segments are dropped
    subsample: float = 1e-3       # word2vec's frequent-word threshold t (0 = keep all)
    max_frames: int = 50          # segments are cut to this many 10 ms frames
    epochs: int = 10
    batch_size: int = 128
    lr: float = 0.001
    seed: int = 1
    threads: int = 2
    train_splits: tuple[str, ...] = ("train", "dev")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "Speech2VecConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise Speech2VecError(f"speech2vec config: unknown keys {unknown}; known: {sorted(known)}")
        values = dict(values)
        if "train_splits" in values:
            values["train_splits"] = tuple(values["train_splits"])
        config = cls(**values)
        if config.window < 1 or config.min_count < 1 or config.dim < 1 or config.max_frames < 2:
            raise Speech2VecError(f"speech2vec config: window, min_count, dim >= 1 and max_frames >= 2 ({config})")
        return config


# --- segments ---------------------------------------------------------------------------------------------


@dataclass
class SegmentSet:
    """The word segments of one split: token strings, which tokens have audio, MFCC frames, talk of each token."""

    split: str
    words: list[str]
    has_audio: np.ndarray    # (N,) bool
    frames: np.ndarray       # (T, n_mfcc) float32, memory-mapped
    offsets: np.ndarray      # (N + 1,) int64: token i owns frames[offsets[i]:offsets[i+1]]
    talk_of_token: np.ndarray  # (N,) int32: talk number (-1 where unknown)

    @property
    def audio_tokens(self) -> np.ndarray:
        return np.flatnonzero(self.has_audio & (np.diff(self.offsets) > 0))


def _read_words(path: Path) -> list[str]:
    return list(read_iwslt(path).words)


def load_segments(acoustic_dir: str | Path, prepared_dir: str | Path, split: str,
                  talks_table: str | Path | None = None) -> SegmentSet:
    """The segments of ``split`` from the ``features`` stage's output (``acoustic_dir/<split>/``)."""
    split_dir = Path(acoustic_dir) / split
    for name in (FRAMES_FILE, OFFSETS_FILE, "has_audio.npy"):
        if not (split_dir / name).is_file():
            raise FileNotFoundError(f"{split_dir / name}: missing; run the features stage for split {split!r}")
    words = _read_words(Path(prepared_dir) / f"{split}.tsv")
    offsets = np.load(split_dir / OFFSETS_FILE)
    has_audio = np.load(split_dir / "has_audio.npy")
    if len(offsets) != len(words) + 1 or len(has_audio) != len(words):
        raise Speech2VecError(
            f"{split_dir}: {len(offsets) - 1} MFCC tokens / {len(has_audio)} audio flags but "
            f"{len(words)} tokens in {Path(prepared_dir) / f'{split}.tsv'}; re-run the features stage"
        )
    talk_of_token = np.full(len(words), -1, np.int32)
    if talks_table is not None and Path(talks_table).is_file():
        number = 0
        for row in read_talks_table(talks_table):
            if row.get("split") == split:
                talk_of_token[row["first_token"]: row["first_token"] + row["tokens"]] = number
                number += 1
    return SegmentSet(split, words, has_audio.astype(bool), np.load(split_dir / FRAMES_FILE, mmap_mode="r"),
                      offsets, talk_of_token)


@dataclass
class _Occurrence:
    set_index: int
    token: int


@dataclass
class TrainingData:
    """Training segments in memory (cut to ``max_frames``) and their skip-gram neighbourhoods."""

    frames: list[np.ndarray]          # one (T_i, n_mfcc) array per segment, normalised
    words: list[str]
    neighbours: list[np.ndarray]      # per segment: (K, 2) int array of (segment index, signed offset)
    mean: np.ndarray
    std: np.ndarray
    counts: Counter = field(default_factory=Counter)


def _cut(frames: np.ndarray, max_frames: int) -> np.ndarray:
    if len(frames) <= max_frames:
        return frames
    # keep the middle: the edges of a segment are the most affected by boundary errors
    start = (len(frames) - max_frames) // 2
    return frames[start:start + max_frames]


def collect_training_data(sets: Sequence[SegmentSet], config: Speech2VecConfig) -> TrainingData:
    """Segments of words seen at least ``min_count`` times, with their in-talk neighbours within ``window``."""
    counts: Counter = Counter()
    for segments in sets:
        counts.update(segments.words[i] for i in segments.audio_tokens)
    frames: list[np.ndarray] = []
    words: list[str] = []
    neighbours: list[np.ndarray] = []
    for segments in sets:
        tokens = segments.audio_tokens
        kept = [int(i) for i in tokens if counts[segments.words[i]] >= config.min_count]
        position = {token: len(frames) + k for k, token in enumerate(kept)}
        for token in kept:
            frames.append(np.asarray(_cut(segments.frames[segments.offsets[token]:segments.offsets[token + 1]],
                                          config.max_frames), np.float32))
            words.append(segments.words[token])
        for token in kept:
            near = []
            for offset in range(-config.window, config.window + 1):
                other = token + offset
                if offset == 0 or other not in position:
                    continue
                if segments.talk_of_token[token] != segments.talk_of_token[other]:
                    continue
                near.append((position[other], offset))
            neighbours.append(np.asarray(near, np.int64).reshape(-1, 2))
    if not frames:
        raise Speech2VecError(
            f"no training segments: splits {[s.split for s in sets]} have no aligned tokens of words seen "
            f">= {config.min_count} times"
        )
    stacked = np.concatenate(frames)
    mean, std = stacked.mean(axis=0), stacked.std(axis=0) + 1e-5
    frames = [((f - mean) / std).astype(np.float32) for f in frames]
    return TrainingData(frames, words, neighbours, mean.astype(np.float32), std.astype(np.float32), counts)


def keep_probabilities(words: Sequence[str], counts: Counter, threshold: float) -> np.ndarray:
    """word2vec's subsampling: keep a segment of word w with probability min(1, sqrt(t/f) + t/f)."""
    if threshold <= 0:
        return np.ones(len(words))
    total = sum(counts[w] for w in counts)
    frequency = np.array([counts[w] / total for w in words])
    ratio = threshold / frequency
    return np.minimum(1.0, np.sqrt(ratio) + ratio)


# --- the model -------------------------------------------------------------------------------------------


def _pad(batch: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(x) for x in batch], dtype=torch.long)
    padded = torch.zeros(len(batch), int(lengths.max()), batch[0].shape[1])
    for i, x in enumerate(batch):
        padded[i, : len(x)] = torch.from_numpy(np.asarray(x))
    return padded, lengths


class Speech2VecModel(nn.Module):
    def __init__(self, n_mfcc: int, config: Speech2VecConfig):
        super().__init__()
        self.config = config
        self.encoder = nn.GRU(n_mfcc, config.encoder_hidden, batch_first=True, bidirectional=True)
        self.to_vector = nn.Linear(2 * config.encoder_hidden, config.dim)
        self.offset_embedding = nn.Embedding(2 * config.window + 1, config.dim)
        self.init_state = nn.Linear(config.dim, config.decoder_hidden)
        self.decoder = nn.GRU(n_mfcc, config.decoder_hidden, batch_first=True)
        if config.attention:
            self.attention_keys = nn.Linear(2 * config.encoder_hidden, config.decoder_hidden)
            self.attention_values = nn.Linear(2 * config.encoder_hidden, config.decoder_hidden)
            out_in = 2 * config.decoder_hidden
        else:
            out_in = config.decoder_hidden
        self.output = nn.Sequential(nn.Linear(out_in, config.decoder_hidden), nn.Tanh(),
                                    nn.Linear(config.decoder_hidden, n_mfcc))

    def _encode(self, frames: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        packed = nn.utils.rnn.pack_padded_sequence(frames, lengths, batch_first=True, enforce_sorted=False)
        states, final = self.encoder(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=frames.size(1))
        vector = self.to_vector(torch.cat([final[0], final[1]], dim=-1))
        return vector, states

    def embed(self, frames: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The fixed vector of each segment, ``(B, dim)``."""
        return self._encode(frames, lengths)[0]

    def forward(self, centre: torch.Tensor, centre_lengths: torch.Tensor, offsets: torch.Tensor,
                target: torch.Tensor, target_lengths: torch.Tensor) -> torch.Tensor:
        """Mean squared reconstruction error of the target (neighbour) frames."""
        vector, states = self._encode(centre, centre_lengths)
        condition = vector + self.offset_embedding(offsets + self.config.window)
        hidden = torch.tanh(self.init_state(condition)).unsqueeze(0)
        # teacher forcing: the decoder sees the previous target frame (zeros before the first)
        previous = torch.cat([torch.zeros_like(target[:, :1]), target[:, :-1]], dim=1)
        outputs, _ = self.decoder(previous, hidden)
        if self.config.attention:
            keys = self.attention_keys(states)
            values = self.attention_values(states)
            scores = outputs @ keys.transpose(1, 2) / math.sqrt(keys.size(-1))
            centre_mask = torch.arange(centre.size(1))[None, :] < centre_lengths[:, None]
            scores = scores.masked_fill(~centre_mask[:, None, :], float("-inf"))
            context = torch.softmax(scores, dim=-1) @ values
            outputs = torch.cat([outputs, context], dim=-1)
        predicted = self.output(outputs)
        mask = (torch.arange(target.size(1))[None, :] < target_lengths[:, None]).unsqueeze(-1)
        error = ((predicted - target) ** 2) * mask
        return error.sum() / (mask.sum() * target.size(-1))


# --- training and export ---------------------------------------------------------------------------------


def _write_word2vec_text(path: Path, words: Sequence[str], vectors: np.ndarray) -> None:
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=vectors.shape[1])
    kv.add_vectors(list(words), vectors.astype(np.float32))
    with atomic_path(path) as temporary:
        kv.save_word2vec_format(str(temporary), binary=False)


@torch.no_grad()
def embed_segments(model: Speech2VecModel, frames: np.ndarray, offsets: np.ndarray, tokens: np.ndarray,
                   mean: np.ndarray, std: np.ndarray, *, batch_size: int = 512,
                   desc: str = "speech2vec embed") -> np.ndarray:
    """The fixed vectors of the given tokens' segments, ``(len(tokens), dim)`` float32."""
    model.eval()
    out = np.zeros((len(tokens), model.config.dim), np.float32)
    for start in tqdm(range(0, len(tokens), batch_size), desc=desc, unit="batch", leave=False):
        chunk = tokens[start:start + batch_size]
        batch = [(_cut(np.asarray(frames[offsets[t]:offsets[t + 1]], np.float32), model.config.max_frames) - mean) / std
                 for t in chunk]
        padded, lengths = _pad(batch)
        out[start:start + len(chunk)] = model.embed(padded, lengths).numpy()
    return out


def train_speech2vec(acoustic_dir: str | Path, prepared_dir: str | Path, out_dir: str | Path, *,
                     config: Speech2VecConfig, embed_splits: Sequence[str] = ("train", "dev", "ref", "asr"),
                     talks_table: str | Path | None = None) -> dict[str, Any]:
    """Train Speech2Vec on ``config.train_splits`` and write the vectors (see the module docstring).

    Returns the summary also written to ``out_dir/speech2vec.json``, plus the run's ``train_seconds`` and
    ``seconds`` (not in the file, which holds only what the same run always gives).
    """
    started = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)

    train_sets = [load_segments(acoustic_dir, prepared_dir, s, talks_table) for s in config.train_splits]
    data = collect_training_data(train_sets, config)
    n_mfcc = data.frames[0].shape[1]
    model = Speech2VecModel(n_mfcc, config)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    keep = keep_probabilities(data.words, data.counts, config.subsample)
    has_neighbour = np.array([len(n) > 0 for n in data.neighbours])
    losses: list[float] = []
    train_started = time.perf_counter()
    for epoch in range(config.epochs):
        centres = np.flatnonzero(has_neighbour & (rng.random(len(keep)) < keep))
        rng.shuffle(centres)
        model.train()
        total, batches = 0.0, 0
        bar = tqdm(range(0, len(centres), config.batch_size), desc=f"speech2vec epoch {epoch + 1}/{config.epochs}",
                   unit="batch", leave=False)
        for start in bar:
            chunk = centres[start:start + config.batch_size]
            # dynamic window as in word2vec: a reach drawn from 1..window, then one neighbour within it
            picks = []
            for c in chunk:
                reach = rng.integers(1, config.window + 1)
                near = data.neighbours[c]
                near = near[np.abs(near[:, 1]) <= reach]
                if len(near) == 0:
                    near = data.neighbours[c]
                picks.append(near[rng.integers(len(near))])
            centre, centre_lengths = _pad([data.frames[c] for c in chunk])
            target, target_lengths = _pad([data.frames[p[0]] for p in picks])
            offsets = torch.tensor([int(p[1]) for p in picks], dtype=torch.long)
            loss = model(centre, centre_lengths, offsets, target, target_lengths)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            total += loss.item()
            batches += 1
            bar.set_postfix(loss=f"{total / batches:.4f}")
        losses.append(total / max(batches, 1))
        log.info("speech2vec epoch %d: reconstruction MSE %.4f (%d centres)", epoch + 1, losses[-1], len(centres))
    train_seconds = time.perf_counter() - train_started

    # type-level vectors: mean over every training segment of the word
    model.eval()
    vectors_by_word: dict[str, list[np.ndarray]] = {}
    for segments in train_sets:
        tokens = np.array([t for t in segments.audio_tokens if data.counts[segments.words[t]] >= config.min_count],
                          np.int64)
        vectors = embed_segments(model, segments.frames, segments.offsets, tokens, data.mean, data.std,
                                 desc=f"speech2vec types {segments.split}")
        for token, vector in zip(tokens, vectors):
            vectors_by_word.setdefault(segments.words[token], []).append(vector)
    vocabulary = sorted(vectors_by_word, key=lambda w: (-len(vectors_by_word[w]), w))
    type_vectors = np.stack([np.mean(vectors_by_word[w], axis=0) for w in vocabulary]).astype(np.float32)
    _write_word2vec_text(out_dir / VECTORS_FILE, vocabulary, type_vectors)

    # per-occurrence vectors for every token with audio in every split
    occurrences: dict[str, Any] = {}
    for split in embed_splits:
        split_dir = Path(acoustic_dir) / split
        if not (split_dir / "mfcc.npy").is_file():
            log.warning("no acoustic features for split %s: no per-occurrence vectors", split)
            continue
        segments = load_segments(acoustic_dir, prepared_dir, split, talks_table)
        tokens = segments.audio_tokens.astype(np.int64)
        vectors = embed_segments(model, segments.frames, segments.offsets, tokens, data.mean, data.std,
                                 desc=f"speech2vec occurrences {split}")
        target = out_dir / OCCURRENCES_DIR / split
        target.mkdir(parents=True, exist_ok=True)
        np.save(target / "index.npy", tokens)
        np.save(target / "vectors.npy", vectors)
        occurrences[split] = {"tokens": len(segments.words), "tokens_with_vector": int(len(tokens))}

    torch.save({"state_dict": model.state_dict(), "config": dataclasses.asdict(config), "n_mfcc": n_mfcc,
                "mean": data.mean, "std": data.std, "format": FORMAT_VERSION}, out_dir / MODEL_FILE)
    summary = {
        "format": FORMAT_VERSION,
        "config": dataclasses.asdict(config),
        "training_segments": len(data.frames),
        "training_words": len(data.counts),
        "vocabulary": len(vocabulary),
        "epoch_losses": [round(x, 5) for x in losses],
        "occurrences": occurrences,
    }
    # The file is part of the stage's output (hashed by DVC): only what the same run always gives. The wall times
    # go back to the caller alone.
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return {**summary, "train_seconds": round(train_seconds, 1), "seconds": round(time.perf_counter() - started, 1)}


def load_occurrences(directory: str | Path, split: str, num_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense ``(num_tokens, dim)`` per-occurrence vectors of ``split`` and the mask of tokens that have one."""
    target = Path(directory) / OCCURRENCES_DIR / split
    for name in ("index.npy", "vectors.npy"):
        if not (target / name).is_file():
            raise FileNotFoundError(f"{target / name}: missing; run the speech2vec stage (split {split!r})")
    index, vectors = np.load(target / "index.npy"), np.load(target / "vectors.npy")
    if len(index) and int(index.max()) >= num_tokens:
        raise Speech2VecError(f"{target}: token index {int(index.max())} beyond the split's {num_tokens} tokens")
    dense = np.zeros((num_tokens, vectors.shape[1]), np.float32)
    mask = np.zeros(num_tokens, bool)
    dense[index] = vectors
    mask[index] = True
    return dense, mask
