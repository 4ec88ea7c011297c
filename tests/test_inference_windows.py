import numpy as np
import pytest
import torch

from inference.windows import owner_of_each_token, predict_stream, window_starts


@pytest.mark.parametrize("length", [0, 1, 5, 10, 11, 37, 100])
def test_windows_cover_every_token(length):
    starts = window_starts(length, 10, 5)
    covered = np.zeros(length, dtype=bool)
    for start in starts:
        assert 0 <= start and start + min(10, length) <= length
        covered[start:start + 10] = True
    assert covered.all()


def test_bad_window_settings_are_refused():
    with pytest.raises(ValueError):
        window_starts(10, 5, 6)
    with pytest.raises(ValueError):
        window_starts(10, 0, 1)


def test_tokens_are_owned_by_the_window_where_they_are_most_central():
    starts = window_starts(20, 10, 5)  # [0, 5, 10]
    owner, offset = owner_of_each_token(20, 10, starts)
    assert starts == [0, 5, 10]
    assert owner[0] == 0 and owner[8] == 1 and owner[19] == 2
    assert all(offset[i] == i - starts[owner[i]] for i in range(20))
    # the interior token 8 is central in window 1 (5..14), not at the edge of window 0
    assert 2 <= offset[8] <= 7


def test_predict_stream_reassembles_token_order_and_never_truncates():
    # a "model" that predicts (global token id) % 4 from the ids it sees: the stitched output must be the
    # same sequence, whatever the windowing
    length = 1234
    ids = np.arange(length)
    vectors = np.zeros((length, 3), dtype=np.float32)

    def predict(batch):
        return batch["ids"] % 4

    for window, stride in [(100, 50), (64, 64), (7, 3)]:
        labels = predict_stream(predict, vectors, ids, window=window, stride=stride, batch_size=5)
        assert np.array_equal(labels, ids % 4)


def test_predict_stream_uses_central_windows():
    # a "model" that marks positions at the edge of its window with 1: central ownership means none
    # survives except at the stream ends
    length, window = 300, 20
    ids = np.arange(length)

    def predict(batch):
        positions = torch.arange(batch["ids"].shape[1]).expand_as(batch["ids"])
        return ((positions < 2) | (positions >= window - 2)).long()

    labels = predict_stream(predict, np.zeros((length, 1), dtype=np.float32), ids, window=window, stride=10)
    assert labels[2:-2].sum() == 0


def test_streams_sharing_batches_come_back_each_in_order():
    """Several streams in shared batches: each stream's labels as it gets them alone, the batches exactly those of
    predict_stream for one stream, and probabilities (a tuple) gathered the same way."""
    from inference.windows import predict_streams

    lengths = [5, 130, 1, 64, 301]
    streams = [(np.full((n, 2), k, dtype=np.float32), np.arange(n) + 1000 * k, [f"w{k}.{i}" for i in range(n)])
               for k, n in enumerate(lengths)]
    seen = []

    def predict(batch):
        seen.append([row[0] for row in batch["words"]])  # each row's first word: where its window starts
        assert all(len(row) == int(mask.sum()) for row, mask in zip(batch["words"], batch["mask"]))
        return batch["ids"] % 7

    results = predict_streams(predict, streams, window=20, stride=10, batch_size=4)
    assert [r.tolist() for r in results] == [(np.arange(n) + 1000 * k).__mod__(7).tolist()
                                             for k, n in enumerate(lengths)]
    assert all(len(rows) <= 4 for rows in seen) and sum(map(len, seen)) == sum(
        len(window_starts(n, 20, 10)) for n in lengths)
    vectors, ids, _ = streams[4]
    alone = predict_streams(lambda batch: batch["ids"] % 7, [(vectors, ids, None)], window=20, stride=10)
    assert np.array_equal(alone[0], predict_stream(lambda batch: batch["ids"] % 7, vectors, ids, window=20,
                                                   stride=10))

    def with_probabilities(batch):
        labels = batch["ids"] % 4
        return labels, torch.nn.functional.one_hot(labels, 4).float()

    [(labels, probabilities)] = predict_streams(with_probabilities, [streams[1]], window=20, stride=10)
    assert probabilities.shape == (130, 4) and np.array_equal(probabilities.argmax(axis=1), labels)
    with pytest.raises(ValueError, match="an empty stream"):
        predict_streams(predict, [streams[0], (np.zeros((0, 2), np.float32), np.zeros(0, np.int64), [])],
                        window=20, stride=10)
