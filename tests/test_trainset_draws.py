"""trainset.draws: the prepare stage's draw of talks run on to more training tokens, and its word features."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus.iwslt import read_iwslt
from tests.fixture_corpus import draw_settings
from trainset.draws import draw_features
from trainset.from_params import prepare_from_params


@pytest.fixture()
def settings(tmp_path):
    return draw_settings(tmp_path)


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


def with_overlapping_talk(data: dict, tmp_path: Path) -> dict:
    """``data`` whose TED file also holds ``Overlap_Talk``: the text dev2012 was cut from (it shares its 8-grams)."""
    import gzip
    import json

    from tests.fixture_corpus import talk_text

    ted = tmp_path / "ted_with_overlap.jsonl.gz"
    with gzip.open(data["ted_talks"], "rt", encoding="utf-8") as source, gzip.open(ted, "wt", encoding="utf-8") as out:
        out.write(source.read())
        out.write(json.dumps({"talk": "Overlap_Talk", "text": talk_text(1000, 60)}) + "\n")
    return {**data, "ted_talks": str(ted)}


def test_a_draw_of_every_talk_leaves_an_overlapping_talk_out_and_records_why(settings, tmp_path):
    """Asked for more tokens than all the talks hold, the draw still leaves out the talk that shares dev's 8-grams
    and the talk held out by name, and its metrics name them; a reason nothing was left out for says none."""
    from embeddings.cache import read_manifest
    from trainset.draws import draw_metrics, make_draw

    data, embed = settings
    data = with_overlapping_talk(data, tmp_path)
    draw = make_draw(data, embed, 10_000_000, tmp_path / "all")
    drawn = talks(draw.prepared)
    assert "Overlap_Talk" not in drawn and "Talk_4" not in drawn and len(drawn) == 29
    metrics = draw_metrics(draw, read_manifest(draw.features))
    exclusions = metrics["exclusions"]
    assert exclusions["overlaps_eval"]["count"] == 1 and exclusions["overlaps_eval"]["talks"] == ["Overlap_Talk"]
    assert exclusions["held_out_by_name"]["talks"] == ["Talk_4"]
    assert exclusions["empty_after_normalisation"] == {"what": "no words after normalisation", "count": 0,
                                                       "talks": []}
    assert "no words after normalisation: none" in exclusions["summary"]
    assert metrics["talks"] == 29 and metrics["train_tokens_asked"] == 10_000_000 and metrics["extra_corpora"] == {}


def test_a_draw_entry_is_a_count_of_tokens_or_a_mapping():
    from trainset.draws import DrawSpec, DrawSpecError, draw_spec

    assert draw_spec(5100000, "long") == draw_spec({"tokens": 5100000}, "long") == DrawSpec(5100000)
    assert draw_spec({"tokens": 9, "extra_corpora": ["earnings22_train"]}, "e") == DrawSpec(9, ("earnings22_train",))
    for value, reason in (({"tokens": 9, "extra": []}, "unknown keys: extra"), ({"extra_corpora": []}, "give"),
                          ({"tokens": 9, "extra_corpora": ["librispeech"]}, r"draws\.e\.extra_corpora is"),
                          ({"tokens": "9"}, r"draws\.e\.tokens is '9'")):
        with pytest.raises(DrawSpecError, match=reason):
            draw_spec(value, "e")


def test_earnings22_train_is_appended_after_the_same_draw_shuffled_by_call(settings, tmp_path):
    """The TED part is the draw's own bytes; then Earnings-22 train's calls (not dev's or test's), in the order of
    data.seed, each a row of train_talks.tsv."""
    import random

    from corpus.earnings22 import call_path, read_call, spoken_words, token_labels
    from tests.fixture_earnings22 import write_earnings22
    from trainset.draws import DrawSpec, make_draw

    data, embed = settings
    earnings = write_earnings22(tmp_path / "earnings22", {"c1": "train", "c2": "train", "c3": "dev", "c5": "train",
                                                          "c4": "test"})
    data = {**data, "earnings22_dir": str(earnings)}
    plain = make_draw(data, embed, 2000, tmp_path / "plain")
    extended = make_draw(data, embed, DrawSpec(2000, ("earnings22_train",)), tmp_path / "extended")
    order = ["c1", "c2", "c5"]
    random.Random(data["seed"]).shuffle(order)
    plain_words = (plain.prepared / "train.tsv").read_text()
    assert (extended.prepared / "train.tsv").read_text().startswith(plain_words)
    appended = read_iwslt(extended.prepared / "train.tsv").words[len(read_iwslt(plain.prepared / "train.tsv")):]
    assert appended == [token for call in order
                        for token in token_labels(spoken_words(read_call(call_path(earnings, call))))[0]]
    rows = [line.split("\t") for line in (extended.prepared / "train_talks.tsv").read_text().splitlines()[1:]]
    assert [row[0] for row in rows[-3:]] == [f"earnings22:{call}" for call in order]
    assert int(rows[-3][1]) == len(read_iwslt(plain.prepared / "train.tsv"))
    assert extended.extra == {"earnings22_train": {"calls": 3, "tokens": len(appended),
                                                   "first_token": int(rows[-3][1])}}
    for split in ("dev", "ref", "asr"):
        assert (plain.prepared / f"{split}.tsv").read_bytes() == (extended.prepared / f"{split}.tsv").read_bytes()


def test_the_draw_stage_takes_a_mapping_entry(settings, tmp_path):
    import json

    import yaml

    from pipeline.draw import main

    data, embed = settings
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"profile": "small", "profiles": {"small": {"data": {}, "train": {},
                                                                                   "experiments": {}}},
                                      "experiment_defs": {}, "train": {}, "data": data, "embed": embed,
                                      "draws": {"long": {"tokens": 1500}, "bad": {"tokens": 1, "more": 2}}}))
    assert main(["--params", str(params), "--draw", "long", "--out", str(tmp_path / "long"),
                 "--metrics", str(tmp_path / "long.json")]) == 0
    metrics = json.loads((tmp_path / "long.json").read_text())
    assert metrics["train_tokens_asked"] == 1500 and metrics["exclusions"]["held_out_by_name"]["count"] == 1
    with pytest.raises(SystemExit, match=r"draws\.bad is .*unknown keys: more"):
        main(["--params", str(params), "--draw", "bad"])
