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
