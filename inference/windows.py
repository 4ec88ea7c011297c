"""Cutting a token stream into model-sized windows and stitching the predictions back together.

At inference, windows overlap (``stride`` < ``window``) and each token takes its label from the window in
which it sits most centrally, so every token gets context on both sides and no mark is lost at a window
edge, whatever the length of the input.

The other rule (``combine="sum"``, :data:`COMBINE_RULES`; Courtland et al., IWSLT 2020): each token takes the
arg-max of its logits summed over every window that covers it -- ``window / stride`` predictions per token. A
window's log-probabilities are its logits less one constant per token (the log-sum-exp), so this is also the
arg-max of the summed log-probabilities, the product of the windows' distributions: each window's evidence
counts by its confidence, a window that is sure at a token outweighs one that is unsure. (Summed probabilities
would average the windows instead, each vote bounded by 1, so that a sure window counts little more than one that
leans; the paper sums logits.) With
one window per token it is that window's arg-max: the centre rule's label. ``predict`` then gives each window's
logits (B, T, labels) instead of label ids, and each token's result comes with the mean of its windows' logits
(whose softmax is the normalised geometric mean of their distributions; its arg-max is the label).

Several streams (the transcripts of a corpus, :func:`predict_streams`) share batches: their windows are taken
in order, stream after stream, so that short texts fill batches as one long text does; one stream alone gives
exactly the batches of :func:`predict_stream`. A window never spans two streams.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch


#: how a token's label is taken from the windows that cover it: ``centre`` (the window it is most central in) or
#: ``sum`` (the arg-max of its logits summed over all of them); module docstring
COMBINE_RULES = ("centre", "sum")


def check_combine(combine: str) -> None:
    if combine not in COMBINE_RULES:
        raise ValueError(f"unknown window combination {combine!r} (one of {', '.join(COMBINE_RULES)})")


def combine_windows(logits: np.ndarray, first: int, starts: list[int], length: int,
                    window: int) -> tuple[np.ndarray, np.ndarray]:
    """``(label ids (length,), mean logits (length, labels))`` of a stream of ``length`` tokens from the logits of
    its windows at ``starts``: rows ``first``, ``first + 1``, ... of ``logits`` (rows, window, labels). The label is
    the arg-max of the float64 sum over the windows covering the token (the sum, not the mean, so that one window
    per token gives exactly its own arg-max)."""
    total = np.zeros((length, logits.shape[-1]), dtype=np.float64)
    count = np.zeros(length, dtype=np.int64)
    for row, start in enumerate(starts, start=first):
        end = min(start + window, length)
        total[start:end] += logits[row, :end - start]
        count[start:end] += 1
    return total.argmax(axis=1).astype(np.int64), total / count[:, None]


def window_starts(length: int, window: int, stride: int) -> list[int]:
    """Start offsets of windows of ``window`` tokens every ``stride`` tokens covering ``length`` tokens.

    The last window is shifted left so it ends at the stream's end (no short trailing window unless the
    whole stream is shorter than one window).
    """
    if window < 1 or not 1 <= stride <= window:
        raise ValueError(f"need window >= 1 and 1 <= stride <= window, got window={window}, stride={stride}")
    if length <= window:
        return [0] if length > 0 else []
    starts = list(range(0, length - window + 1, stride))
    if starts[-1] + window < length:
        starts.append(length - window)
    return starts


def owner_of_each_token(length: int, window: int, starts: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """For each token, the index of the window whose centre is nearest, and its offset in that window."""
    owner = np.zeros(length, dtype=np.int64)
    best = np.full(length, np.inf)
    positions = np.arange(length)
    for index, start in enumerate(starts):
        end = min(start + window, length)
        centre = (start + end - 1) / 2.0
        span = slice(start, end)
        distance = np.abs(positions[span] - centre)
        closer = distance < best[span]
        owner[span][closer] = index
        best[span][closer] = distance[closer]
    return owner, positions - np.asarray(starts)[owner]


def make_batch(vectors: np.ndarray, ids: np.ndarray, spans: list[tuple[int, int]], window: int,
               labels: np.ndarray | None = None, words: Sequence[str] | None = None) -> dict:
    """Stack token spans ``[(start, end), ...]`` into a padded batch dict (see models.registry).

    With ``words`` (the stream's token strings) the batch also carries ``words``: one unpadded list of
    strings per row, for models that tokenise text themselves (pretrained language models).
    """
    batch_size, dim = len(spans), vectors.shape[1]
    batch_vectors = np.zeros((batch_size, window, dim), dtype=np.float32)
    batch_ids = np.zeros((batch_size, window), dtype=np.int64)
    batch_mask = np.zeros((batch_size, window), dtype=bool)
    batch_labels = np.zeros((batch_size, window), dtype=np.int64)
    for row, (start, end) in enumerate(spans):
        n = end - start
        batch_vectors[row, :n] = vectors[start:end]
        batch_ids[row, :n] = ids[start:end]
        batch_mask[row, :n] = True
        if labels is not None:
            batch_labels[row, :n] = labels[start:end]
    batch = {
        "vectors": torch.from_numpy(batch_vectors),
        "ids": torch.from_numpy(batch_ids),
        "mask": torch.from_numpy(batch_mask),
    }
    if labels is not None:
        batch["labels"] = torch.from_numpy(batch_labels)
    if words is not None:
        batch["words"] = [list(words[start:end]) for start, end in spans]
    return batch


def predict_stream(
    predict: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    vectors: np.ndarray,
    ids: np.ndarray,
    *,
    window: int,
    stride: int,
    batch_size: int = 64,
    progress: Callable | None = None,
    words: Sequence[str] | None = None,
    combine: str = "centre",
) -> np.ndarray:
    """Label ids for a whole token stream of any length, from overlapping windows.

    ``predict`` maps a batch dict to (B, T) label ids (a model's ``predict``); with ``combine="sum"``, to (B, T,
    labels) logits.
    """
    length = len(ids)

    def batch_of(starts: list[int]) -> dict:
        spans = [(start, min(start + window, length)) for start in starts]
        return make_batch(vectors, ids, spans, window, words=words)

    return predict_windows(predict, batch_of, length, window=window, stride=stride, batch_size=batch_size,
                           progress=progress, combine=combine)


def predict_windows(
    predict: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    batch_of: Callable[[list[int]], dict],
    length: int,
    *,
    window: int,
    stride: int,
    batch_size: int = 64,
    progress: Callable | None = None,
    combine: str = "centre",
) -> np.ndarray:
    """:func:`predict_stream` over any source of batches: ``batch_of(starts)`` makes the padded batch of the
    windows at ``starts`` (e.g. gathered from tokens already on the device).

    The predictions stay where ``predict`` leaves them until the last batch, and come to the host at once: no
    wait for the device per batch. ``combine``: :data:`COMBINE_RULES` (``sum``: ``predict`` gives logits).
    """
    check_combine(combine)
    if length == 0:
        return np.zeros(0, dtype=np.int64)
    starts = window_starts(length, window, stride)
    batches = range(0, len(starts), batch_size)
    predicted = [predict(batch_of(starts[first:first + batch_size])) for first in
                 (progress(batches) if progress else batches)]
    if combine == "sum":
        return combine_windows(_to_host(torch.cat(predicted)), 0, starts, length, window)[0]
    owner, offset = owner_of_each_token(length, window, starts)
    window_predictions = torch.cat(predicted).cpu().numpy().astype(np.int64, copy=False)
    return window_predictions[owner, offset]


def _to_host(predicted: torch.Tensor) -> np.ndarray:
    array = predicted.cpu().numpy()
    return array if np.issubdtype(array.dtype, np.floating) else array.astype(np.int64, copy=False)


def predict_streams(
    predict: Callable[[dict[str, torch.Tensor]], torch.Tensor | tuple[torch.Tensor, ...]],
    streams: Sequence[tuple[np.ndarray, np.ndarray, Sequence[str] | None]],
    *,
    window: int,
    stride: int,
    batch_size: int = 64,
    progress: Callable | None = None,
    combine: str = "centre",
) -> list:
    """Per stream ``(vectors, ids, words)``, the prediction of each token (:func:`predict_stream` for each, the
    windows of all of them sharing batches, in order).

    ``predict`` maps a batch to (B, T) label ids, or to a tuple of (B, T, ...) tensors (label ids and label
    probabilities); each stream's result is then a tuple of arrays too. ``words`` (None: the batch carries no
    words) are for models that tokenise text themselves. Every stream holds at least one token.

    ``combine="sum"`` (:data:`COMBINE_RULES`): ``predict`` maps a batch to (B, T, labels) logits, and each
    stream's result is ``(label ids (N,), mean logits (N, labels))`` (:func:`combine_windows`).
    """
    check_combine(combine)
    if any(len(ids) == 0 for _, ids, _ in streams):
        raise ValueError("predict_streams: an empty stream (leave it out: it has nothing to label)")
    rows: list[tuple[int, int]] = []  # (stream, start) of every window, stream after stream
    plans = []
    for index, (_, ids, _) in enumerate(streams):
        starts = window_starts(len(ids), window, stride)
        plans.append((len(rows), starts))
        rows.extend((index, start) for start in starts)
    reads_words = any(words is not None for _, _, words in streams)

    def batch_of(chunk: list[tuple[int, int]]) -> dict:
        dim = streams[chunk[0][0]][0].shape[1]
        vectors = np.zeros((len(chunk), window, dim), dtype=np.float32)
        ids = np.zeros((len(chunk), window), dtype=np.int64)
        mask = np.zeros((len(chunk), window), dtype=bool)
        words = []
        for row, (index, start) in enumerate(chunk):
            stream_vectors, stream_ids, stream_words = streams[index]
            end = min(start + window, len(stream_ids))
            vectors[row, :end - start] = stream_vectors[start:end]
            ids[row, :end - start] = stream_ids[start:end]
            mask[row, :end - start] = True
            if reads_words:
                words.append(list(stream_words[start:end]))
        batch = {"vectors": torch.from_numpy(vectors), "ids": torch.from_numpy(ids), "mask": torch.from_numpy(mask)}
        if reads_words:
            batch["words"] = words
        return batch

    batches = range(0, len(rows), batch_size)
    predicted = [predict(batch_of(rows[first:first + batch_size])) for first in
                 (progress(batches) if progress else batches)]
    if not predicted:
        return []
    # to the host at once, at the end: no wait for the device per batch
    if isinstance(predicted[0], tuple):
        joined = tuple(_to_host(torch.cat([part[k] for part in predicted])) for k in range(len(predicted[0])))
    else:
        joined = _to_host(torch.cat(predicted))
    if combine == "sum":
        return [combine_windows(joined, first, starts, len(ids), window) for (first, starts), (_, ids, _)
                in zip(plans, streams)]
    results = []
    for (first, starts), (_, ids, _) in zip(plans, streams):
        owner, offset = owner_of_each_token(len(ids), window, starts)
        owner += first
        results.append(tuple(part[owner, offset] for part in joined) if isinstance(joined, tuple)
                       else joined[owner, offset])
    return results
