"""trainset.draws: the prepare stage's draw of talks run on to more training tokens, and its word features."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus.iwslt import read_iwslt
from tests.fixture_corpus import write_corpus
from trainset.draws import draw_features
from trainset.from_params import prepare_from_params


@pytest.fixture()
def settings(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", talks=30, sentences_per_talk=20)
    data = {"iwslt_dir": str(corpus["iwslt"]), "ted_talks": str(corpus["ted"]),
            "eval_splits": {"dev": "dev2012", "ref": "test2011", "asr": "test2011asr"}, "overlap_ngram": 8,
            "overlap_min_shared_fraction": 0.02, "seed": 3, "excluded_talks": ["Talk_4"], "train_tokens": 1000,
            "real_speech_dir": str(tmp_path), "real_speech_talks": []}
    embed = {"word_source": {"type": "word2vec-text", "path": str(corpus["vectors"])}, "oov": "random",
             "vocab_min_count": 1}
    return data, embed


def talks(prepared: Path) -> list[str]:
    return [line.split("\t")[0] for line in (prepared / "train_talks.tsv").read_text().splitlines()[1:]]


def test_a_longer_draw_starts_with_the_default_draw(settings, tmp_path):
    """Drawn on to twice the tokens, the default draw's talks come first, in order (its last, cut at a sentence end
    there, whole here), the held-out talk stays out, and the evaluation splits are the same words."""
    data, embed = settings
    prepare_from_params(data, tmp_path / "default")
    features = draw_features(data, embed, 2000, tmp_path / "long")
    assert features == tmp_path / "long" / "features" and (features / "manifest.json").is_file()
    short, long = talks(tmp_path / "default"), talks(tmp_path / "long" / "prepared")
    assert len(long) > len(short) and long[:len(short) - 1] == short[:-1] and short[-1] in long
    assert "Talk_4" not in long
    assert 1000 < len(read_iwslt(tmp_path / "long" / "prepared" / "train.tsv").words) <= 2000
    for split in ("dev", "ref", "asr"):
        assert read_iwslt(tmp_path / "default" / f"{split}.tsv").words == read_iwslt(
            tmp_path / "long" / "prepared" / f"{split}.tsv").words


def test_the_words_are_drawn_again_and_the_features_rebuilt_only_when_they_change(settings, tmp_path):
    data, embed = settings
    features = draw_features(data, embed, 2000, tmp_path / "long")
    built = (features / "manifest.json").stat().st_mtime_ns
    assert draw_features(data, embed, 2000, tmp_path / "long") == features
    assert (features / "manifest.json").stat().st_mtime_ns == built  # the same words: the cache reused
    draw_features(data, embed, 1500, tmp_path / "long")
    assert (features / "manifest.json").stat().st_mtime_ns != built  # fewer words: drawn and built again
    assert len(read_iwslt(tmp_path / "long" / "prepared" / "train.tsv").words) <= 1500


def test_a_missing_setting_is_named(settings, tmp_path):
    from experiments.params import ParamsError

    data, embed = settings
    with pytest.raises(ParamsError, match=r"missing 'data\.overlap_ngram'"):
        draw_features({k: v for k, v in data.items() if k != "overlap_ngram"}, embed, 2000, tmp_path / "long")


@pytest.mark.parametrize("tokens", ["4.2M", 0, True])
def test_the_draw_stage_names_a_draw_that_is_not_a_count_of_tokens(tokens, tmp_path):
    import yaml

    from pipeline.draw import main

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"profile": "small", "profiles": {"small": {"data": {}, "train": {},
                                                                                   "experiments": {}}},
                                      "experiment_defs": {}, "train": {}, "data": {}, "embed": {},
                                      "draws": {"long": tokens}}))
    with pytest.raises(SystemExit, match=r"draws\.long is"):
        main(["--params", str(params), "--draw", "long"])
    with pytest.raises(SystemExit, match=r"no entry 'short'"):
        main(["--params", str(params), "--draw", "short"])
