"""Speech that helps on real speech: the pause model, simulated cues, a model that reads timing cues,
``punctuate --alignment/--audio``, the default models of params.yaml and the real-speech evaluation stage."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from corpus.iwslt import read_iwslt
from corpus.labels import LABELS
from embeddings.cache import SPEECH_JSON, SPLITS
from embeddings.speech_sources import PAUSES_FILE
from embeddings.timing_features import PauseModel
from inference import cli
from realspeech.cues import read_real_talk
from realspeech.evaluate import evaluate_real_speech, real_speech_markdown
from tests.fixture_corpus import TINY_BLSTM, TINY_TRAIN
from tests.fixture_real_speech import TIMING_FEATURES, timed_feature_caches

FEATURES = TIMING_FEATURES


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny corpus, two tiny real-speech talks, their pause model, and a text model and a timing model."""
    from training import train_model

    root = tmp_path_factory.mktemp("real_speech")
    caches = timed_feature_caches(root)
    caches["model"].save(root / "pauses" / "model.json")
    train = {**TINY_TRAIN, "max_steps": 4, "eval_every_steps": 4, "dev_eval_tokens": 100}
    for name, features in (("text_model", "features"), ("audio_model", "fs_timed")):
        train_model(root / features, root / "artifacts" / name, root / "state" / name, model_config=TINY_BLSTM,
                    train_config=train, window=30, stride=15)
    return {"root": root, **{key: caches[key] for key in ("real", "talks", "model", "stats", "corpus")},
            "text_model": root / "artifacts" / "text_model", "audio_model": root / "artifacts" / "audio_model"}


def test_pause_model_of_the_real_talks(setup):
    model: PauseModel = setup["model"]
    assert model.talks == setup["talks"]
    summary = model.summary()
    assert summary["PERIOD"]["share_pause_0.2s"] > 0.9 > 0.2 > summary["O"]["share_pause_0.2s"]
    assert 0 < model.missing_rate < 0.2  # one word in 37 untimed, and the word before it, and the last word
    talk = read_real_talk(setup["real"], setup["talks"][0])
    assert "don't" in talk.words and len(talk.words) == len(talk.labels)


def test_simulated_cues_per_split(setup):
    root, stats = setup["root"], setup["stats"]
    for split in SPLITS:
        for variant in ("timed", "control"):
            raw = np.load(root / "pauses" / variant / split / PAUSES_FILE)
            assert raw.shape[1] == 3 and raw.shape[0] == stats[split]["tokens"]
            if split in ("ref", "asr"):
                assert (raw[:, 2] == 1).all()  # no real recordings: every cue missing
    assert 0.5 < stats["train"]["timed_share_with_cues"] == stats["train"]["control_share_with_cues"] < 0.95
    assert stats["train"]["timed_share_pause_0.2s"]["PERIOD"] > 0.9


def test_read_real_talk_checks_its_files(tmp_path, setup):
    with pytest.raises(FileNotFoundError, match="Nobody.txt"):
        read_real_talk(setup["real"], "Nobody")
    name = setup["talks"][0]
    for suffix in (".txt", ".timings.tsv"):
        (tmp_path / f"{name}{suffix}").write_bytes((setup["real"] / f"{name}{suffix}").read_bytes())
    words = (setup["real"] / f"{name}.ref.tsv").read_text().splitlines()
    words[2] = "wrong\tO"
    (tmp_path / f"{name}.ref.tsv").write_text("\n".join(words) + "\n")
    with pytest.raises(ValueError, match=r"ref\.tsv:3: the reference's words differ"):
        read_real_talk(tmp_path, name)


def test_the_timing_model_reads_speech_and_text_alone(setup):
    from inference.punctuator import Punctuator
    from inference.speech_input import read_timing_rows

    speech = json.loads((setup["audio_model"] / "embedder" / SPEECH_JSON).read_text())
    assert speech["source"]["type"] == "pauses" and speech["source"]["features"] == FEATURES
    audio, text = Punctuator(setup["audio_model"]), Punctuator(setup["text_model"])
    assert audio.reads_timings and not text.reads_timings
    talk = read_real_talk(setup["real"], setup["talks"][0])
    rows = read_timing_rows(talk.timings_path)
    for punctuator in (audio, text):
        for timings in (None, rows):
            user_text, labels, rendered = punctuator.punctuate_text(talk.text, timings=timings)
            assert [w.text for w in user_text.words] == list(talk.words) and set(labels) <= set(LABELS)
    # the cues reach the model: with timings the scores of the words differ from text alone
    tokens = [t for w in user_text.words for t in w.tokens]
    from corpus.user_text import split_user_text
    from inference.speech_input import match_timings, timing_raw

    split = split_user_text(talk.text)
    raw = timing_raw(split, *match_timings(split, rows))
    assert raw.shape == (len(tokens), 3) and (raw[:, 2] == 0).mean() > 0.8
    with pytest.raises(ValueError, match="timing cues for"):
        audio.predict_labels(tokens, raw[:-1])


def test_label_probabilities_go_with_the_labels(setup):
    from corpus.user_text import split_user_text
    from inference.punctuator import Punctuator
    from inference.speech_input import match_timings, read_timing_rows, timing_raw

    talk = read_real_talk(setup["real"], setup["talks"][0])
    split = split_user_text(talk.text)
    tokens = [t for w in split.words for t in w.tokens]
    raw = timing_raw(split, *match_timings(split, read_timing_rows(talk.timings_path)))
    audio = Punctuator(setup["audio_model"])
    for timing in (None, raw):
        labels, probabilities = audio.predict_label_probabilities(tokens, timing)
        assert labels == audio.predict_labels(tokens, timing)
        assert probabilities.shape == (len(tokens), len(LABELS))
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
        assert [LABELS[i] for i in probabilities.argmax(axis=1)] == labels
    assert audio.predict_label_probabilities([], None)[1].shape == (0, len(LABELS))


def test_evaluate_real_speech_and_its_report(setup, tmp_path):
    talks = setup["talks"]
    models = {"text_model": setup["text_model"], "audio_model": setup["audio_model"],
              "crossed": {talks[0]: setup["audio_model"], talks[1]: setup["audio_model"]}}
    groups = {"first": [talks[0]], "both": list(talks)}
    result = evaluate_real_speech(setup["real"], talks, models, predictions_dir=tmp_path / "pred", groups=groups)
    assert set(result["models"]) == set(models)
    assert result["groups"]["first"] == {"talks": [talks[0]], "words": result["talks"][talks[0]]["words"]}
    for name, entry in result["models"].items():  # a group pools its talks' labels: one talk is its own score
        for scores in entry["text"], entry.get("timings", entry["text"]):
            assert scores["groups"]["both"] == scores["all"]
            assert scores["groups"]["first"] == scores["talks"][talks[0]]
    assert "timings" not in result["models"]["text_model"] and "timings" in result["models"]["audio_model"]
    for name in ("audio_model", "crossed"):
        entry = result["models"][name]["timings"]
        assert set(entry["talks"]) == set(talks)
        assert 0 <= entry["all"]["OVERALL"]["f1"] <= 1 and entry["all"]["words"] == sum(
            result["talks"][t]["words"] for t in talks)
    assert result["models"]["crossed"]["timings"] == result["models"]["audio_model"]["timings"]  # the same model
    written = (tmp_path / "pred" / f"audio_model.timings.{talks[0]}.tsv").read_text().splitlines()
    assert len(written) == result["talks"][talks[0]]["words"]
    with pytest.raises(ValueError, match="one model directory per talk"):
        evaluate_real_speech(setup["real"], talks, {"bad": {talks[0]: setup["audio_model"]}})
    with pytest.raises(ValueError, match="groups name talks that are not scored: {'odd': \\['nowhere'\\]}"):
        evaluate_real_speech(setup["real"], talks, models, groups={"odd": ["nowhere"]})
    iwslt = {"text_model": {"ref": {"OVERALL": {"f1": 0.5}, "SER": 0.6}, "asr": {"OVERALL": {"f1": 0.4}, "SER": 0.7}}}
    markdown = real_speech_markdown(result, iwslt=iwslt, baseline="text_model",
                                    pause_model=setup["model"].summary(), notes=["- a note"])
    assert "| text_model | text only |" in markdown and "| audio_model | text + real timings |" in markdown
    assert "| text_model | 50.0 | 60.0 | 40.0 | 70.0 |" in markdown
    assert "## The pause model" in markdown and "- a note" in markdown and f"`{talks[1]}`" in markdown
    first = 100 * result["models"]["audio_model"]["timings"]["groups"]["first"]["OVERALL"]["f1"]
    assert "## By group of talks" in markdown and f"| model | input | first (1 talks, " in markdown
    assert f"| audio_model | text + real timings | {first:.1f} | " in markdown


# ----------------------------------------------------------------------------- the command


def _talk_files(setup):
    name = setup["talks"][1]
    return setup["real"] / f"{name}.txt", setup["real"] / f"{name}.timings.tsv", setup["real"] / f"{name}.ref.tsv"


def test_punctuate_with_an_alignment_keeps_every_word(setup, tmp_path):
    text, timings, ref = _talk_files(setup)
    out = tmp_path / "out.tsv"
    assert cli.main(["--model", str(setup["audio_model"]), "--alignment", str(timings), str(text), "--format",
                     "iwslt", "-o", str(out)]) == 0
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert [word for word, _ in rows] == [line.split("\t")[0] for line in ref.read_text().splitlines()]
    # the text path of the same model still works, and so does a text model given timings
    assert cli.main(["--model", str(setup["audio_model"]), str(text), "-o", str(tmp_path / "a.txt")]) == 0
    assert cli.main(["--model", str(setup["text_model"]), "--alignment", str(timings), str(text), "-o",
                     str(tmp_path / "b.txt")]) == 0


def test_punctuate_reports_timings_that_do_not_fit(setup, tmp_path, capsys):
    import re

    text, timings, _ = _talk_files(setup)
    lines = timings.read_text().splitlines()

    def with_row(index: int, row: str) -> list[str]:
        return lines[:index] + [row] + lines[index + 1:]

    word3 = lines[3].split("\t")[0]
    cases = {
        "other_word.tsv": (with_row(3, "zebra\t" + "\t".join(lines[3].split("\t")[1:])),
                           rf"other_word\.tsv:4: the word 'zebra' does not match the transcript's word 3, "
                           rf"'{word3}' \({re.escape(str(text))}:1\)"),
        "short.tsv": (lines[:-5], "the timings end after"),
        "long.tsv": (lines + ["again\t999\t999.5"], rf"long\.tsv:{len(lines) + 1}: the word 'again' is beyond"),
        "negative.tsv": (with_row(3, f"{word3}\t-1\t0.5"), r"negative\.tsv:4: start time -1\.0 is negative"),
        "order.tsv": (with_row(3, f"{word3}\t0.0\t0.1"), r"order\.tsv:4: times out of order"),
        "text.tsv": (with_row(3, f"{word3}\tabc\t0.1"), r"text\.tsv:4: start time 'abc' is not a number"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_text("\n".join(content) + "\n")
        assert cli.main(["--model", str(setup["audio_model"]), "--alignment", str(path), str(text)]) == 2, name
        error = capsys.readouterr().err
        assert error.startswith("punctuate: error: ") and re.search(message, error), (name, error)


def test_default_models_come_from_params(setup, tmp_path, capsys):
    text, timings, _ = _talk_files(setup)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"punctuate": {"text_model": "missing/model",
                                                    "audio_model": str(setup["audio_model"])}}))
    # with --alignment the audio model is used ...
    assert cli.main(["--params", str(params), "--alignment", str(timings), str(text), "-o",
                     str(tmp_path / "out.txt")]) == 0
    # ... without it the text model, relative to the params file
    assert cli.main(["--params", str(params), str(text)]) == 2
    assert str(tmp_path / "missing" / "model") in capsys.readouterr().err
    (tmp_path / "empty.yaml").write_text("data: {}\n")
    assert cli.main(["--params", str(tmp_path / "empty.yaml"), str(text)]) == 2
    assert "names no punctuate.text_model" in capsys.readouterr().err
    assert cli.main(["--params", str(tmp_path / "nope.yaml"), str(text)]) == 2
    assert "no params file" in capsys.readouterr().err


def test_the_repository_names_both_default_models():
    """punctuate's text model is a trained experiment; its audio model and the audio model's control are that
    experiment tuned the same way (the same model and train settings) with the timing cues and with label-free cues:
    the two differ only in their inputs."""
    params = yaml.safe_load((Path(cli.__file__).resolve().parents[1] / "params.yaml").read_text())
    section = params["punctuate"]
    experiment = Path(section["text_model"]).parts[1]
    assert section["text_model"] == f"artifacts/{experiment}/model"
    assert experiment in params["experiments"]
    run = Path(section["audio_model"]).parts[1]
    assert params["tunings"][run] == {**params["tunings"][run], "from": experiment, "features": "word_pauses_mix"}
    speech_set = params["embed"]["feature_sets"]["word_pauses_mix"]
    # the speech mix: TED's training set with simulated cues, and Earnings-22 train with its real ones
    assert speech_set["speech_source"]["type"] == "pauses" and speech_set["prepared"] == "data/pauses/mix/prepared"
    assert params["pauses"]["mix"]["ted"] is True and params["pauses"]["mix"]["earnings22_splits"] == ["train"]
    control = params["tunings"][f"{run}_control"]
    assert section["compare"]["audio_control"] == f"variant_artifacts/{run}_control/{experiment}/model"
    assert params["embed"]["feature_sets"][control["features"]]["speech_source"]["path"].endswith("control")
    assert (control["model"], control["train"]) == (params["tunings"][run]["model"], params["tunings"][run]["train"])

def test_punctuate_with_audio(setup, tmp_path):
    from audio.reference_speech import flite_available, synthesize

    if not flite_available():
        pytest.skip("flite is not installed (apt-get install flite)")
    transcript = "Well, I don't know. It is fine, really."
    wav = tmp_path / "speech.wav"
    synthesize(transcript, wav)
    (tmp_path / "speech.txt").write_text(transcript.lower().replace(",", "").replace(".", ""))
    out = tmp_path / "out.tsv"
    assert cli.main(["--model", str(setup["audio_model"]), "--audio", str(wav), str(tmp_path / "speech.txt"),
                     "--format", "iwslt", "-o", str(out)]) == 0
    assert [line.split("\t")[0] for line in out.read_text().splitlines()] == \
        "well i don't know it is fine really".split()


def test_punctuate_audio_errors(setup, tmp_path, capsys):
    text, _, _ = _talk_files(setup)
    assert cli.main(["--model", str(setup["audio_model"]), "--audio", str(tmp_path / "none.wav"), str(text)]) == 2
    assert "none.wav: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["--alignment", "a.tsv", "--audio", "b.wav", str(text)])


# ----------------------------------------------------------------------------- the stages


def test_fit_pauses_and_evaluate_real_stages(setup, tmp_path):
    from pipeline import evaluate_real, fit_pauses
    from realspeech.earnings22 import prepare_earnings22
    from tests.fixture_earnings22 import write_earnings22

    root = setup["root"]
    earnings22 = tmp_path / "earnings22"
    prepare_earnings22(write_earnings22(tmp_path / "earnings22_data"), earnings22, progress=False)
    params = yaml.safe_load((Path(cli.__file__).resolve().parents[1] / "params.yaml").read_text())
    params["data"].update(real_speech_dir=str(setup["real"]), real_speech_talks=setup["talks"])
    params["pauses"].update(dropout_span=20, min_pool=5)
    params["punctuate"] = {"text_model": str(setup["text_model"]), "audio_model": str(setup["audio_model"]),
                           "compare": {}, "cross_fitted": {}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    assert fit_pauses.main(["--params", str(path), "--prepared", str(root / "prepared"), "--out",
                            str(tmp_path / "pauses"), "--metrics", str(tmp_path / "pauses.json"),
                            "--talks", setup["talks"][0], "--earnings22", str(earnings22)]) == 0
    metrics = json.loads((tmp_path / "pauses.json").read_text())
    assert metrics["pause_model"]["talks"] == [setup["talks"][0]] and metrics["splits"]["ref"]["simulated"] is False
    assert (tmp_path / "pauses" / "control" / "train" / PAUSES_FILE).is_file()
    # the speech mix: TED's training tokens with their simulated cues, then Earnings-22 train's with their real ones
    mix = tmp_path / "pauses" / "mix"
    ted, calls = read_iwslt(root / "prepared" / "train.tsv"), read_iwslt(earnings22 / "train.tsv")
    assert read_iwslt(mix / "prepared" / "train.tsv").words == ted.words + calls.words
    timed = np.load(mix / "timed" / "train" / PAUSES_FILE)
    assert np.array_equal(timed[len(ted):], np.load(earnings22 / "timing" / "train" / PAUSES_FILE))
    assert np.array_equal(timed[:len(ted)], np.load(tmp_path / "pauses" / "timed" / "train" / PAUSES_FILE))
    assert metrics["mix"]["train_tokens"] == len(ted) + len(calls)
    assert evaluate_real.main(["--params", str(path), "--out", str(tmp_path / "real.md"), "--metrics",
                               str(tmp_path / "real.json"), "--pause-model", str(tmp_path / "pauses" / "model.json"),
                               "--cross-fitted",
                               f"folds={setup['talks'][0]}:{setup['audio_model']},"
                               f"{setup['talks'][1]}:{setup['audio_model']}"]) == 0
    result = json.loads((tmp_path / "real.json").read_text())
    assert set(result["models"]) == {"text_model", "audio_model", "folds"}
    report = (tmp_path / "real.md").read_text()
    assert "`audio_model` with the real timings against `text_model`" in report and "## The pause model" in report

    # the same chain on a prepared Earnings-22 split's calls, as punctuate reads them (stage evaluate_earnings22)
    params["punctuate"]["compare"] = {"audio_control": str(setup["audio_model"])}
    path.write_text(yaml.safe_dump(params))
    assert evaluate_real.main(["--params", str(path), "--earnings22", str(earnings22 / "calls" / "test"), "--out",
                               str(tmp_path / "e22.md"), "--metrics", str(tmp_path / "e22.json")]) == 0
    result = json.loads((tmp_path / "e22.json").read_text())
    assert set(result["models"]) == {"text_model", "audio_model", "audio_control"}
    assert set(result["talks"]) == {"c4"} and set(result["models"]["audio_model"]) >= {"text", "timings"}
    report = (tmp_path / "e22.md").read_text()
    assert report.startswith("# Earnings-22 test: real earnings calls") and "## Per talk" in report
    assert "kept for reporting only" in report and "| `c4` |" in report and "## `c4`" not in report
    assert result["groups"] == {"calls timed ≥ 50 %": {"talks": ["c4"], "words": result["talks"]["c4"]["words"]},
                                "calls timed < 50 %": {"talks": [], "words": 0}}
    assert "## By group of talks" in report and "`audio_model` against `audio_control`, both with the real " in report


def test_the_iwslt_figures_of_a_model_are_the_metrics_that_name_its_directory(tmp_path):
    from evaluation.benchmark import find_evaluation

    for path, model in (("eval/blstm.json", "artifacts/blstm/model"),
                        ("eval_variants/run/blstm.json", "variant_artifacts/run/blstm/model")):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(json.dumps({"model": model, "ref": {"OVERALL": {"f1": 0.5}}}))
    (tmp_path / "eval" / "broken.json").write_text("{not json")
    dirs = [tmp_path / "eval", tmp_path / "eval_variants"]
    found = find_evaluation("variant_artifacts/run/blstm/model", dirs)
    assert found[0] == tmp_path / "eval_variants/run/blstm.json" and found[1]["ref"]["OVERALL"]["f1"] == 0.5
    assert find_evaluation("./artifacts/blstm/model/", dirs)[0] == tmp_path / "eval/blstm.json"
    assert find_evaluation("/somewhere/else", dirs) is None
