"""The training data as the trainer sees it: the seeded window plan of each epoch, and batches cut from a split.

A batch is a set of window starts; :class:`TokenStore` turns them into the padded batch dict the models read
(see ``models.registry``). It holds a split either as the cached memory-mapped arrays (each batch copied
from them: :func:`inference.windows.make_batch`, the CPU default) or *resident*: the whole split as tensors
on the device, each batch gathered there by index (the CUDA default; no host work or copy per step). Both
give the same tensors.

Two of the ASR-robustness levers live here, both off by default (``train`` settings, recorded in the model
directory only when set):

* random window boundaries (Shi et al., Interspeech 2021): :func:`epoch_plan` has always cut each epoch at a
  random offset of its own (one draw per epoch, then windows edge to edge), which *is* that lever;
  ``window_jitter`` is the stronger variant: every window's start moves by its own random amount, so the windows
  align neither to a grid nor to another epoch's. The plan stays a function of the seed and the epoch, so
  :func:`schedule_steps` counts its steps on the host.
* ASR-style noise (Alam et al., W-NUT 2020): :class:`AsrNoise`, applied where the training store cuts a batch
  (``TokenStore(..., noise=...)``, made by :func:`asr_noise`); never in dev evaluation, whose store has none.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from corpus.labels import NO_MARK_ID
from embeddings.embedder import TokenEmbedder
from embeddings.store import EMBEDDER_DIR, SPEECH_JSON
from embeddings.vocab import UNK, UNK_ID
from inference.windows import make_batch
from training.config import LR_SCHEDULES


def epoch_plan(num_tokens: int, seq_len: int, batch_size: int, seed: int, epoch: int, *,
               jitter: int = 0) -> list[np.ndarray]:
    """The batches of window starts for one epoch: a random offset, then shuffled non-overlapping windows.

    ``jitter`` (``train.window_jitter``; 0: the plan above): each window's start is the previous one's plus
    ``seq_len`` plus its own draw from ``[-jitter, jitter]`` (a little overlap or a few tokens skipped), so no two
    epochs share a grid and the boundaries are new at every epoch; the number of windows may change by epoch.
    """
    rng = np.random.default_rng([seed, epoch])
    offset = int(rng.integers(seq_len)) if num_tokens > 2 * seq_len else 0
    last = max(num_tokens - seq_len, 0)
    if jitter and num_tokens > 2 * seq_len:
        jitter = min(int(jitter), seq_len - 1)  # every gap is at least one token
        gaps = seq_len + rng.integers(-jitter, jitter + 1, size=(last - offset) // (seq_len - jitter) + 1)
        starts = offset + np.concatenate([[0], np.cumsum(gaps)])
        starts = starts[starts <= last]
    else:
        starts = np.arange(offset, last + 1, seq_len)
    if len(starts) == 0:
        starts = np.array([0])
    starts = rng.permutation(starts)
    return [starts[i:i + batch_size] for i in range(0, len(starts), batch_size)]


def schedule_steps(num_tokens: int, train_config) -> int:
    """Steps of the full schedule (every epoch's windows), before any ``max_steps`` budget.

    ``train_config``: a :class:`training.config.TrainConfig` or a ``train`` mapping of params."""
    get = train_config.get if isinstance(train_config, dict) else lambda key: getattr(train_config, key)
    seq_len, batch_size, seed = int(get("seq_len")), int(get("batch_size")), int(get("seed"))
    jitter = int((train_config.get("window_jitter") if isinstance(train_config, dict)
                  else getattr(train_config, "window_jitter", 0)) or 0)  # absent from older settings: 0
    return sum(len(epoch_plan(num_tokens, seq_len, batch_size, seed, epoch, jitter=jitter))
               for epoch in range(int(get("epochs"))))


def real_tokens(starts: Sequence[int] | np.ndarray, window: int, num_tokens: int) -> int:
    """How many real (unpadded) tokens the windows at ``starts`` hold: known on the host, without the device."""
    starts = np.asarray(starts, dtype=np.int64)
    return int(np.minimum(starts + window, num_tokens).sum() - starts.sum())


#: the alterations of :class:`AsrNoise` (0: the token as it is)
KEEP, SUBSTITUTE, DELETE, INSERT = 0, 1, 2, 3
#: mixed into the seed of a batch's noise, apart from :func:`epoch_plan`'s draws
_NOISE_SALT = 41


class AsrNoise:
    """ASR-style noise on training windows (Alam et al., W-NUT 2020, Table 7): each token of a window is altered
    with probability ``rate``: substituted by the unknown token (share ``substitute``), deleted (``delete``), or an
    unknown token is inserted before it (the rest; the paper: 0.15 with shares 0.4 / 0.4 / 0.2).

    Labels as in the authors' code (xashru/punctuation-restoration, ``src/augmentation.py``): a substituted token
    keeps its label, an inserted unknown token is labelled O, a deleted token's label goes with it (its mark is
    lost, as when a recogniser drops the word before a mark). The authors alter subword positions; here the unit is
    the benchmark token (a word), which is what every model of this project labels.

    The window keeps its length and its real-token count: a deletion shifts the rest of the window left and reads
    one more token of the stream at its end (a deletion the stream cannot refill, at its very end, is not made);
    an insertion pushes the window's last token out. The mask is therefore the unaltered batch's, and so are
    :data:`models.encoders.ALL_REAL` and the token counts the trainer takes from the window starts.

    The unknown token: for a model that reads words, the word ``unk_word`` (the encoder tokenizer's own, e.g.
    ``[UNK]``, which it reads as its unknown subword); its vocabulary id :data:`embeddings.vocab.UNK_ID`; its input
    vector the embedder's vector of ``<unk>`` (what any out-of-vocabulary word gets under the ``zero`` and ``mean``
    policies; one fixed random vector under ``random``) in the word columns. Speech columns concatenated after them
    (``combine: concat``) are kept by a substitution (the token was heard there) and zero for an insertion (for
    timing cues: no pause after it, usual length, timed -- a short word run into the next); where word and speech
    vectors are summed the unknown row is the ``<unk>`` vector alone.

    The draws of a batch are seeded by the run's seed and the batch's window starts (a function of the seed, the
    epoch and the step): the same run gives the same bytes, a resumed run the same noise, with no step counter.
    """

    def __init__(self, rate: float, substitute: float, delete: float, seed: int, *, unk_vector: np.ndarray,
                 speech_columns: str = "none", unk_word: str = UNK):
        if not 0 <= rate < 1 or substitute < 0 or delete < 0 or substitute + delete > 1 + 1e-9:
            raise ValueError(f"AsrNoise: need 0 <= rate < 1 and shares summing to at most 1, got rate={rate}, "
                             f"substitute={substitute}, delete={delete}")
        if speech_columns not in ("none", "concat", "sum"):
            raise ValueError(f"AsrNoise: speech_columns must be none, concat or sum, got {speech_columns!r}")
        self.rate, self.substitute, self.delete, self.seed = float(rate), float(substitute), float(delete), int(seed)
        self.unk_vector = np.asarray(unk_vector, dtype=np.float32)
        self.speech_columns, self.unk_word = speech_columns, unk_word
        self._rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def unknown_row(self, width: int) -> tuple[np.ndarray, np.ndarray]:
        """``(row, kept)`` for input rows of ``width`` columns: the unknown token's row, and the columns a
        substitution keeps from the token it replaces (its speech columns)."""
        if width not in self._rows:
            dim = len(self.unk_vector)
            row, kept = np.zeros(width, dtype=np.float32), np.zeros(width, dtype=bool)
            if self.speech_columns == "concat" or dim == 0:  # no word columns (word source none): speech alone
                row[:dim] = self.unk_vector[:width]
                kept[dim:] = True
            elif dim != width:
                raise ValueError(f"AsrNoise: the unknown vector has {dim} columns, the input rows {width}")
            else:
                row[:] = self.unk_vector
            self._rows[width] = (row, kept)
        return self._rows[width]

    def alterations(self, starts: Sequence[int] | np.ndarray, window: int, num_tokens: int):
        """``(source, unknown, inserted, mask)``, each (B, window): the stream position each position of each
        window reads (-1: an inserted token; 0 at padding), whether it is shown as the unknown token (substituted
        or inserted), whether it was inserted, and the real positions (those of the unaltered windows)."""
        starts = [int(s) for s in starts]
        rows, reach = len(starts), 2 * window  # a window reads at most `reach` tokens of the stream (else KEEP)
        rng = np.random.default_rng([self.seed, _NOISE_SALT, *starts])
        altered = rng.random((rows, reach)) < self.rate
        kind = rng.random((rows, reach))
        ops = np.where(altered, np.where(kind < self.substitute, SUBSTITUTE,
                                         np.where(kind < self.substitute + self.delete, DELETE, INSERT)), KEEP)
        source = np.zeros((rows, window), dtype=np.int64)
        unknown = np.zeros((rows, window), dtype=bool)
        inserted = np.zeros((rows, window), dtype=bool)
        mask = np.zeros((rows, window), dtype=bool)
        for row, (start, row_ops) in enumerate(zip(starts, ops.tolist())):
            length = max(0, min(window, num_tokens - start))
            mask[row, :length] = True
            out, position, k = 0, start, 0
            while out < length:
                op = row_ops[k] if k < reach else KEEP
                k += 1
                if op == DELETE:
                    if num_tokens - position - 1 >= length - out:  # the stream refills the window
                        position += 1
                        continue
                    op = KEEP
                if op == INSERT:
                    source[row, out], unknown[row, out], inserted[row, out] = -1, True, True
                    out += 1
                    if out == length:
                        break
                source[row, out], unknown[row, out] = position, op == SUBSTITUTE
                out += 1
                position += 1
        return source, unknown, inserted, mask


def asr_noise(config, features_dir, model) -> AsrNoise | None:
    """The :class:`AsrNoise` of a run's ``config`` (:class:`training.config.TrainConfig`; None when
    ``augment_rate`` is 0) for ``model`` on the feature cache ``features_dir`` (its embedder gives the unknown
    token's vector, its ``speech.json`` the layout of the speech columns)."""
    if not config.augment_rate:
        return None
    embedder_dir = Path(features_dir) / EMBEDDER_DIR
    unk_vector = TokenEmbedder.load(embedder_dir).embed([UNK]).vectors[0]
    speech_columns = "none"
    if (embedder_dir / SPEECH_JSON).is_file():
        speech_columns = json.loads((embedder_dir / SPEECH_JSON).read_text(encoding="utf-8"))["combine"]
    unk_word = UNK  # read by no model but one that reads words
    if getattr(model, "reads_words", False):
        unk_word = getattr(getattr(model, "tokenizer", None), "unk_token", None) or UNK
    return AsrNoise(config.augment_rate, config.augment_substitute, config.augment_delete, config.seed,
                    unk_vector=unk_vector, speech_columns=speech_columns, unk_word=unk_word)


class TokenStore:
    """One split's token vectors, ids and labels (and words, for models that read them), cut into windows.

    ``resident``: copy the arrays to ``device`` once and gather every batch there; otherwise build each batch
    on the host from the (memory-mapped) arrays and move it to ``device``. ``noise``: the training store's
    :class:`AsrNoise`, applied to every batch it cuts (None: the windows as they are).
    """

    def __init__(self, vectors: np.ndarray, ids: np.ndarray, labels: np.ndarray | None, *,
                 words: Sequence[str] | None, device: torch.device, resident: bool, noise: AsrNoise | None = None):
        self.vectors, self.ids, self.labels, self.words = vectors, ids, labels, words
        self.device, self.resident, self.noise = device, resident, noise
        self.num_tokens = len(ids)
        if resident:
            # copies: the cached arrays are read-only memory maps
            self._vectors = torch.from_numpy(np.array(vectors, dtype=np.float32)).to(device)
            self._ids = torch.from_numpy(np.array(ids, dtype=np.int64)).to(device)
            self._labels = None if labels is None else torch.from_numpy(np.array(labels, dtype=np.int64)).to(device)

    def nbytes(self) -> int:
        """Bytes the resident copy takes on the device (0 when not resident)."""
        if not self.resident:
            return 0
        return sum(t.numel() * t.element_size() for t in (self._vectors, self._ids, self._labels) if t is not None)

    def spans(self, starts: Sequence[int], window: int) -> list[tuple[int, int]]:
        return [(int(s), min(int(s) + window, self.num_tokens)) for s in starts]

    def batch(self, starts: np.ndarray, window: int, *, device_starts: torch.Tensor | None = None,
              with_labels: bool = True) -> dict:
        """The padded batch of the windows of ``window`` tokens at ``starts`` (host integers).

        ``device_starts``: the same starts already on the device (a resident store then transfers nothing).
        """
        labels = self.labels if with_labels else None
        if self.noise is not None:
            return self._noisy_batch(starts, window, with_labels)
        if not self.resident:
            batch = make_batch(self.vectors, self.ids, self.spans(starts, window), window, labels, self.words)
            return {key: value.to(self.device, non_blocking=True) if isinstance(value, torch.Tensor) else value
                    for key, value in batch.items()}
        if device_starts is None:
            device_starts = torch.as_tensor(np.asarray(starts, dtype=np.int64)).to(self.device, non_blocking=True)
        positions = device_starts[:, None] + torch.arange(window, device=self.device)
        mask = positions < self.num_tokens
        index = positions.clamp(max=max(self.num_tokens - 1, 0))
        batch = {
            "vectors": torch.where(mask[..., None], self._vectors[index], 0.0),
            "ids": torch.where(mask, self._ids[index], 0),
            "mask": mask,
        }
        if with_labels and self._labels is not None:
            batch["labels"] = torch.where(mask, self._labels[index], 0)
        if self.words is not None:
            batch["words"] = [list(self.words[start:end]) for start, end in self.spans(starts, window)]
        return batch

    def _noisy_batch(self, starts: np.ndarray, window: int, with_labels: bool) -> dict:
        """The batch of :meth:`batch` with :class:`AsrNoise`: the same windows and mask, their tokens altered. The
        alterations are drawn on the host; a resident store gathers by their index map on the device."""
        noise = self.noise
        source, unknown, inserted, mask = noise.alterations(starts, window, self.num_tokens)
        index = np.where(mask & ~inserted, source, 0)
        row, kept = noise.unknown_row(int(self.vectors.shape[1]))
        replace = unknown[..., None] & (inserted[..., None] | ~kept)  # (B, T, V): columns of the unknown row
        if self.resident:
            to = lambda array: torch.as_tensor(array).to(self.device, non_blocking=True)  # noqa: E731
            index_t, mask_t, unknown_t, inserted_t = to(index), to(mask), to(unknown), to(inserted)
            vectors = torch.where(to(replace), to(row), self._vectors[index_t])
            batch = {"vectors": torch.where(mask_t[..., None], vectors, 0.0),
                     "ids": torch.where(unknown_t, UNK_ID, torch.where(mask_t, self._ids[index_t], 0)),
                     "mask": mask_t}
            if with_labels and self._labels is not None:
                batch["labels"] = torch.where(mask_t & ~inserted_t, self._labels[index_t], NO_MARK_ID)
        else:
            vectors = np.where(replace, row, np.asarray(self.vectors[index.ravel()], dtype=np.float32)
                               .reshape(*index.shape, -1))
            batch = {"vectors": torch.from_numpy(np.where(mask[..., None], vectors, 0.0).astype(np.float32)),
                     "ids": torch.from_numpy(np.where(unknown, UNK_ID, np.where(mask, self.ids[index.ravel()]
                                                      .reshape(index.shape), 0)).astype(np.int64)),
                     "mask": torch.from_numpy(mask)}
            if with_labels and self.labels is not None:
                batch["labels"] = torch.from_numpy(
                    np.where(mask & ~inserted, np.asarray(self.labels)[index.ravel()].reshape(index.shape),
                             NO_MARK_ID).astype(np.int64))
            batch = {key: value.to(self.device, non_blocking=True) for key, value in batch.items()}
        if self.words is not None:
            words = self.words
            batch["words"] = [[noise.unk_word if unknown[r, i] else words[source[r, i]] for i in range(int(n))]
                              for r, n in enumerate(mask.sum(axis=1))]
        return batch


def transformer_schedule(warmup_steps: int):
    """Linear warm-up to the peak rate, then decay with 1/sqrt(step) (Vaswani et al. 2017).

    Returned as a multiplier of the peak learning rate for ``torch.optim.lr_scheduler.LambdaLR``.
    """
    def multiplier(step: int) -> float:
        step = max(step, 1)
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))

    return multiplier


def linear_schedule(warmup_steps: int, total_steps: int):
    """Linear warm-up to the peak rate, then a straight line down to zero at ``total_steps`` (the schedule used
    to fine-tune pretrained encoders, Devlin et al. 2019): a short budget ends annealed, where 1/sqrt(step)
    would still be at a third of its peak."""
    def multiplier(step: int) -> float:
        step = max(step, 1)
        if step < warmup_steps:
            return step / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return multiplier


#: where the ``exponential`` schedule ends, as a fraction of the peak rate
EXPONENTIAL_FINAL_FRACTION = 0.1


def exponential_schedule(warmup_steps: int, total_steps: int):
    """Linear warm-up, then exponential decay to :data:`EXPONENTIAL_FINAL_FRACTION` of the peak at
    ``total_steps`` (Yi & Tao: "the learning rate is exponentially decayed during training")."""
    def multiplier(step: int) -> float:
        step = max(step, 1)
        if step < warmup_steps:
            return step / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return EXPONENTIAL_FINAL_FRACTION ** progress

    return multiplier


def constant_schedule(warmup_steps: int):
    """Linear warm-up, then the peak rate to the end (Kyubyong/transformer: Adam at a constant 1e-4)."""
    def multiplier(step: int) -> float:
        return min(1.0, max(step, 1) / warmup_steps)

    return multiplier


def lr_schedule(name: str, warmup_steps: int, total_steps: int):
    """The multiplier function of schedule ``name`` (:data:`LR_SCHEDULES`) for ``LambdaLR``."""
    if name == "rsqrt":
        return transformer_schedule(warmup_steps)
    if name == "linear":
        return linear_schedule(warmup_steps, total_steps)
    if name == "exponential":
        return exponential_schedule(warmup_steps, total_steps)
    if name == "constant":
        return constant_schedule(warmup_steps)
    raise ValueError(f"unknown lr_schedule {name!r} (one of {', '.join(LR_SCHEDULES)})")
