"""The GPU kit (``python -m paper_runs pack | plan | launch | collect | import``; paper_runs/kit.py,
paper_runs/processes.py): a kit that rebuilds every input byte for byte, is the same bytes when packed again, stays
within its limit and names what is missing; the plan counts steps from params; a tarball whose records import
without losing finished work; and, slow, the whole rehearsal of a lease on the CPU (paper_runs/rehearsal.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from embeddings.cache import build_feature_cache
from paper_runs import __main__ as paper
from paper_runs import plan as gpu_plan, processes as gpu_runs, rates as gpu_rates, tarball as gpu_tarball
from paper_runs.kit import ENCODER_PACKAGE, KIT_FILE, KitError, read_index, unpack_kit
from paper_runs.records import PAPER_RUNS
from tests.fixture_checkpoints import make_checkpoint
from tests.fixture_corpus import FILLER, TINY_BLSTM, TINY_MODEL, TINY_TRAIN, write_prepared_corpus
from tests.helpers import REPO, write_word2vec_text

FF2 = {"name": "ff2", "pretrained": None, "interaction": True, "use_pretrained_stream": True, "use_second_stream": True,
       "second_dim": 16, "second_layers": 1, "second_heads": 2, "fusion_heads": 2, "fusion_ffn": 32, "dropout": 0.1,
       "rdrop_alpha": 1.0, "max_subwords": 120}
TINY_MODELS = {
    "transformer": TINY_MODEL, "blstm": TINY_BLSTM, "lstm": {"name": "lstm", "hidden": 16, "layers": 1, "dropout": 0.1},
    "drnn_lwma": {"name": "drnn_lwma", "hidden": 8, "layers": 1, "heads": 2, "layerwise": True, "dropout": 0.1},
    "wrn": {"name": "wrn", "channels": 8, "widen": 2, "blocks": 1, "dropout": 0.1},
    "wrn_blstm": {"name": "wrn_blstm", "channels": 8, "widen": 2, "blocks": 1, "lstm_hidden": 8, "dropout": 0.1},
    "conv": {"name": "conv", "channels": 16, "blocks": 1, "dropout": 0.1}, "ff2": FF2, "ffa": {**FF2, "name": "ffa"},
}
#: a lease long enough for a rehearsal on a slow CPU (the training deadline derived: 3,600 - 60 - 60 - 20 = 3,460 s)
GPU_KIT = {"pack_limit_mib": 56, "travel_limit_mib": 64, "tarball_limit_mib": 16, "lease_s": 7200, "command_s": 3600,
           "allowance_s": {"machine_start": 60, "unpack": 60, "scoring": 60, "collect": 20, "margin": 60},
           "run_start_s": 5, "collect_wait_s": 60, "measure_timeout_s": 300,
           "probe": {"slot_factor": 1.5, "max_slot_s": 90, "exit_wait_s": 60},
           "dev_eval": {"kernel_us": 40, "tflops": 100, "assumed_s": {"default": 1.0}, "measured": {}, "counted": {}},
           "log_tail_kib": 8, "rates_dir": "metrics/gpu/leases", "assumed_steps_per_s": {"default": 5.0, "transformer": 2.0},
           "graph": {"kernel_us": 4.0, "tflops": 100, "recurrent_step_us": 15, "time_slice_overhead": 1.15,
                     "experiments": {"transformer": {"kernels": 1000, "mflop_per_token": 100}}}}


def tiny_params(root: Path, vectors: Path, speech: Path, **gpu_kit) -> dict:
    """Every paper experiment at a tiny size on the fixture corpus, the four inputs of the transformer runs."""
    speech_source = {"type": "word2vec-text", "path": str(speech)}
    return {
        "profile": "small", "experiments": [], "data": {"train_tokens": 1200},
        "embed": {"word_source": {"type": "word2vec-text", "path": str(vectors)}, "oov": "random",
                  "vocab_min_count": 1,
                  "feature_sets": {"word": {}, "learned": {"word_source": {"type": "none"}},
                                   "speech": {"word_source": {"type": "none"}, "speech_source": speech_source},
                                   "word_speech": {"speech_source": speech_source, "combine": "sum"}}},
        "evaluate": {"test_splits": ["ref", "asr"], "window": 30, "stride": 15, "batch_size": 16, "device": "cpu"},
        "train": {**TINY_TRAIN, "epochs": 1, "eval_every_steps": 4, "log_every_steps": 2, "dev_eval_tokens": 200},
        "experiment_defs": {name: {"model": model, "train": {}} for name, model in TINY_MODELS.items()},
        "profiles": {name: {"data": {}, "train": {}, "experiments": {e: {} for e in TINY_MODELS}}
                     for name in ("small", "paper")},
        "gpu_kit": {**GPU_KIT, **gpu_kit},
    }


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A tiny corpus, prepared; its word-vector cache; a second vector file as the speech source; a tiny BERT."""
    root = tmp_path_factory.mktemp("kit_inputs")
    corpus = write_prepared_corpus(root, root / "prepared", talks=10, sentences_per_talk=12, train_tokens=1200)
    rng = np.random.default_rng(5)
    speech = write_word2vec_text(root / "speech.txt", {w: list(rng.normal(size=8)) for w in FILLER[:12]})
    params = tiny_params(root, corpus["vectors"], speech)
    (root / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    build_feature_cache(root / "prepared", root / "features", word_source=params["embed"]["word_source"], oov="random")
    make_checkpoint(root / "encoder", "bert")
    return root


def pack_args(root: Path, kit: Path, params: Path | None = None) -> list[str]:
    return ["--params", str(params or root / "params.yaml"), "pack", "--kit", str(kit), "--features",
            str(root / "features"), "--feature-sets", str(root / "feature_sets"), "--prepared", str(root / "prepared"),
            "--build-dir", str(root / "built"), "--encoder", str(root / "encoder")]


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def kit(inputs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("kit") / "gpu_kit"
    assert paper.main(pack_args(inputs, folder)) == 0
    return folder


def test_the_kit_rebuilds_every_input_byte_for_byte_and_packs_to_the_same_bytes(inputs, kit, tmp_path, capsys):
    assert {p.name for p in (inputs / "built").iterdir()} == {"learned", "speech", "word_speech"}  # built by pack
    again = tmp_path / "again"
    assert paper.main(pack_args(inputs, again)) == 0
    assert (again / KIT_FILE).read_bytes() == (kit / KIT_FILE).read_bytes()
    assert "MiB (limit 56 MiB)" in capsys.readouterr().out

    root, site = tmp_path / "machine", tmp_path / "site"
    done = unpack_kit(kit / KIT_FILE, root, site)
    assert digest(root / "data/features") == digest(inputs / "features")
    for name in ("learned", "speech", "word_speech"):
        assert digest(root / "data/feature_sets" / name) == digest(inputs / "built" / name)
    for split in ("ref", "asr", "dev"):
        assert (root / f"data/prepared/{split}.tsv").read_bytes() == (inputs / f"prepared/{split}.tsv").read_bytes()
    assert not (root / "data/prepared/train.tsv").exists()  # the caches hold the training split
    assert unpack_kit(kit / KIT_FILE, root, site)["unpacked"] == [] and len(done["present"]) == 0

    # the encoder: a stand-in of the pip package, its weights the original's rounded to float16, as float32
    import torch
    from safetensors.torch import load_file

    model = site / ENCODER_PACKAGE / "model"
    assert (model / "config.json").read_bytes() == (inputs / "encoder/config.json").read_bytes()
    original, rebuilt = (load_file(str(p / "model.safetensors")) for p in (inputs / "encoder", model))
    assert rebuilt.keys() == original.keys()
    for key, value in original.items():
        assert rebuilt[key].dtype == value.dtype
        expected = value.to(torch.float16).to(torch.float32) if value.dtype == torch.float32 else value
        assert torch.equal(rebuilt[key], expected), key
    code = f"import {ENCODER_PACKAGE} as m; print(m.__file__)"
    found = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(site)}, capture_output=True, text=True)
    assert found.stdout.strip() == str(site / ENCODER_PACKAGE / "__init__.py")


def test_unpacking_never_overwrites_other_content_unasked(kit, inputs, tmp_path):
    root = tmp_path / "machine"
    (root / "data/features").mkdir(parents=True)
    (root / "data/features/manifest.json").write_text("{}")
    with pytest.raises(KitError, match="exists with other content"):
        unpack_kit(kit / KIT_FILE, root, tmp_path / "site")
    assert "data/features" in unpack_kit(kit / KIT_FILE, root, tmp_path / "site", force=True)["unpacked"]
    assert digest(root / "data/features") == digest(inputs / "features")


def test_a_kit_over_its_limit_is_refused_and_the_old_one_kept(inputs, kit, tmp_path, capsys):
    params = yaml.safe_load((inputs / "params.yaml").read_text())
    params["gpu_kit"]["pack_limit_mib"] = 0.01
    small = tmp_path / "params.yaml"
    small.write_text(yaml.safe_dump(params))
    before = (kit / KIT_FILE).read_bytes()
    assert paper.main(pack_args(inputs, kit, small)) == 2
    err = capsys.readouterr().err
    assert "over its limit of 0.0 MiB (params gpu_kit.pack_limit_mib); its largest parts: encoder model.safetensors" in err
    assert (kit / KIT_FILE).read_bytes() == before


def test_pack_names_each_missing_input_and_the_command_that_builds_it(inputs, tmp_path, capsys):
    params = yaml.safe_load((inputs / "params.yaml").read_text())
    params["embed"]["feature_sets"]["speech"]["speech_source"] = {"type": "speech2vec", "path": str(tmp_path / "s2v")}
    changed = tmp_path / "params.yaml"
    changed.write_text(yaml.safe_dump(params))
    args = pack_args(inputs, tmp_path / "kit", changed)
    args[args.index("--features") + 1] = str(tmp_path / "no_features")
    assert paper.main(args) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'no_features'}: the word-vector cache  ->  dvc repro embed" in err
    assert f"{tmp_path / 's2v'} (for data/feature_sets/speech)  ->  dvc repro speech2vec" in err
    assert not (tmp_path / "kit").exists()


def test_the_plan_counts_each_run_s_steps_from_params(inputs, tmp_path, capsys):
    from experiments.params import load_params
    from training.batches import schedule_steps

    params = load_params(inputs / "params.yaml", profile="paper")
    rows = {row["name"]: row for row in gpu_plan.plan_rows(params, list(PAPER_RUNS), 100_000)}
    steps = schedule_steps(100_000, {**params["train"]})
    assert rows["transformer_word"]["steps"] == steps and rows["blstm"]["steps"] == steps
    assert rows["transformer_word"]["steps_per_s"] == 2.0 and rows["lstm"]["steps_per_s"] == 5.0  # eager: assumed
    literal = rows["transformer_word_literal"]  # its own settings: 100-token windows, 20 epochs
    assert literal["steps"] == schedule_steps(100_000, {**params["train"], "seq_len": 100, "epochs": 20})
    params["active"]["experiments"]["transformer"]["train"]["epochs"] = 10  # a new recipe: ten times the steps
    known = {"rates": {("transformer_word", "eager"): {"steps_per_s": 50.0, "where": "H100, lease x"}}}
    rows = {row["name"]: row for row in gpu_plan.plan_rows(params, ["transformer_word"], 100_000, known=known)}
    assert rows["transformer_word"]["steps"] == 10 * steps
    assert rows["transformer_word"]["rates"]["eager"] == (50.0, "measured, H100, lease x")
    assert paper.main(["--params", str(inputs / "params.yaml"), "--records", str(tmp_path / "records"), "plan", "--kit",
                       str(inputs / "nokit"), "--features", str(inputs / "features"), "--rates-dir",
                       str(tmp_path / "rates")]) == 0
    out = capsys.readouterr().out
    assert "| transformer_word | 8 x 30 |" in out and "(training tokens from" in out
    assert "**training 3460 s**" in out and f"the next lease starts {len(PAPER_RUNS)} of {len(PAPER_RUNS)}" in out.lower()


def record_of(name: str, *, full: bool = True, f1: float = 0.5) -> dict:
    scores = {key: {"precision": f1, "recall": f1, "f1": f1} for key in ("OVERALL", "COMMA", "PERIOD", "QUESTION")}
    return {"ref": {**scores, "SER": 0.5}, "asr": {**scores, "SER": 0.6},
            "run": {"name": name, "steps_completed": 10 if full else 5, "steps_scheduled": 10, "full_schedule": full}}


def write_records(folder: Path, records: dict[str, dict]) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, record in records.items():
        paths[name] = folder / f"{name}.json"
        paths[name].write_text(json.dumps(record))
        (folder / f"{name}.history.csv").write_text("step,train_loss\n1,0.5\n")
    return paths


def test_records_come_back_in_one_tarball_and_import_without_losing_finished_work(tmp_path):
    log = tmp_path / "blstm.log"
    log.write_text("start\n" + "x" * 100_000 + "\rtrain:  50%|##  | 5/10 [00:01<00:01,  4.20step/s]\n")
    machine = write_records(tmp_path / "machine", {"blstm": record_of("blstm"), "lstm": record_of("lstm", full=False)})
    tarball = tmp_path / "out" / "r.tar.gz"
    size = gpu_tarball.write_tarball(tarball, records=machine, status_files={"status.md": b"| run |\n"},
                                  logs={"blstm": log}, limit_bytes=2000, tail_bytes=64 * 1024)
    assert size <= 2000  # the log tail shrank to fit
    assert set(gpu_tarball.tarball_records(tarball)) == {"blstm", "lstm"}

    records, status = tmp_path / "metrics/paper", tmp_path / "status"
    write_records(records, {"lstm": record_of("lstm", full=False, f1=0.1), "blstm": record_of("blstm", full=False)})
    done = gpu_tarball.import_tarball(tarball, records, status)
    assert done["imported"] == ["blstm"]  # a full record replaces a partial one
    assert done["kept"] == ["lstm (a different partial record is there; --replace takes the new one)"]
    assert json.loads((records / "blstm.json").read_text())["run"]["full_schedule"] is True
    assert (records / "blstm.history.csv").read_text().startswith("step,") and (status / "status.md").is_file()
    assert gpu_tarball.import_tarball(tarball, records, status, replace=True)["imported"] == ["lstm"]
    assert gpu_tarball.import_tarball(tarball, records, status)["unchanged"] == ["blstm", "lstm"]


def test_import_never_overwrites_a_complete_record(tmp_path):
    """A complete record (full schedule) stays as it is whatever comes: a partial one, another complete one, even
    with --replace; its learning curve too."""
    coming = write_records(tmp_path / "machine", {"lstm": record_of("lstm", full=False),
                                                  "conv": record_of("conv", f1=0.9)})
    tarball = tmp_path / "r.tar.gz"
    gpu_tarball.write_tarball(tarball, records=coming, status_files={}, logs={}, limit_bytes=10**6, tail_bytes=0)
    records = tmp_path / "records"
    there = write_records(records, {"lstm": record_of("lstm", f1=0.2), "conv": record_of("conv", f1=0.3)})
    (records / "conv.history.csv").write_text("step,train_loss\n7,0.1\n")
    before = {path.name: path.read_bytes() for path in records.iterdir()}
    for replace in (False, True):
        done = gpu_tarball.import_tarball(tarball, records, tmp_path / "status", replace=replace)
        assert done["imported"] == [] and len(done["kept"]) == 2
        assert all("the complete record there is never overwritten" in line for line in done["kept"])
    assert {path.name: path.read_bytes() for path in records.iterdir()} == before
    assert json.loads(there["conv"].read_text())["ref"]["OVERALL"]["f1"] == 0.3


@pytest.mark.parametrize("bad, message", [({"ref": {}}, "no 'asr'"), (None, "lacks precision/recall/f1")])
def test_a_tarball_with_a_bad_record_or_member_is_refused_naming_it(tmp_path, bad, message):
    record = record_of("conv") if bad is None else bad
    if bad is None:
        del record["asr"]["PERIOD"]
    machine = write_records(tmp_path / "m", {"conv": record})
    tarball = tmp_path / "r.tar.gz"
    gpu_tarball.write_tarball(tarball, records=machine, status_files={}, logs={}, limit_bytes=10**6, tail_bytes=0)
    with pytest.raises(gpu_runs.RunsError, match=f"metrics/paper/conv.json: .*{message}"):
        gpu_tarball.import_tarball(tarball, tmp_path / "records", tmp_path / "status")
    assert not (tmp_path / "records").exists()
    with pytest.raises(gpu_runs.RunsError, match="even without logs"):
        gpu_tarball.write_tarball(tmp_path / "big.tar.gz", records=machine, status_files={"x": np.random.default_rng(0).bytes(5000)},
                               logs={}, limit_bytes=1000, tail_bytes=0)


def test_a_second_launch_starts_only_the_runs_without_a_record_or_a_process(tmp_path):
    machine, repo = tmp_path / "machine", tmp_path / "repo"
    write_records(machine, {"blstm": record_of("blstm", full=False)})
    write_records(repo, {"lstm": record_of("lstm"), "conv": record_of("conv", full=False)})
    sleeper = gpu_runs.spawn([sys.executable, "-c", "import time; time.sleep(30)", "paper_runs", "run", "wrn"],
                             tmp_path / "wrn.log", {})
    state = {"runs": {"wrn": {"pid": sleeper.pid, "marker": ["paper_runs", "run", "wrn"]},
                      "ff2": {"pid": 999_999_999, "marker": ["paper_runs", "run", "ff2"]}}}
    try:
        names = ["blstm", "lstm", "conv", "wrn", "ff2"]
        start, skipped = gpu_runs.runs_to_start(names, state, [machine, repo])
        # conv's record in the repository is partial: it runs again; ff2's process is gone
        assert start == ["conv", "ff2"] and set(skipped) == {"blstm", "lstm", "wrn"}
        assert skipped["wrn"] == f"still running (pid {sleeper.pid})" and skipped["lstm"] == "recorded"
    finally:
        sleeper.kill()
        sleeper.wait(timeout=30)


NO_ALLOWANCE = {"machine_start": 0, "unpack": 0, "scoring": 0, "collect": 0, "margin": 0}


def prepare_launch(inputs, tmp_path, monkeypatch, allowance: dict | None = None, **gpu_kit) -> None:
    """A tiny kit in ``tmp_path`` (the working folder now; no machine to prepare) whose transformer_learned has a
    complete record and transformer_word a partial one; ``allowance``: the lease's ``gpu_kit.allowance_s`` (default:
    none); ``gpu_kit``: other settings of it."""
    from paper_runs import lease as gpu_lease

    tmp_path.mkdir(parents=True, exist_ok=True)
    params = tiny_params(tmp_path, inputs / "v.txt", inputs / "s.txt", command_s=300,
                         allowance_s=allowance or NO_ALLOWANCE, **gpu_kit)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "data/features").mkdir(parents=True)
    (tmp_path / "data/features/manifest.json").write_text(json.dumps({"splits": {"train": {"tokens": 20_000}}}))
    records = tmp_path / "metrics/paper"
    write_records(records, {"transformer_learned": record_of("transformer_learned"),
                            "transformer_word": record_of("transformer_word", full=False)})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(gpu_lease, "prepare_machine", lambda *args, **kwargs: {})


def launch_here(inputs, tmp_path, monkeypatch, *options: str, allowance: dict | None = None) -> tuple[list[str], dict]:
    """launch (on the CPU, nothing spawned) over a tiny kit whose transformer_learned has a complete record and
    transformer_word a partial one: (the runs started, in order; the state it saved). ``allowance``: the lease's
    ``gpu_kit.allowance_s`` (default: none)."""
    prepare_launch(inputs, tmp_path, monkeypatch, allowance)
    started = []

    class Process:
        pid = 4242

    monkeypatch.setattr(gpu_runs, "spawn", lambda command, log, env: started.append(command[command.index("run") + 1])
                        or Process())
    monkeypatch.setattr(gpu_runs, "pid_alive", lambda pid, marker: True)
    assert paper.main(["--params", "params.yaml", "launch", "--grace-s", "0", "--device", "cpu", *options]) == 0
    return started, json.loads((tmp_path / "gpu_runs/kit/state.json").read_text())


def test_launch_starts_only_unrecorded_runs_that_end_in_this_lease_in_priority_order(inputs, tmp_path, monkeypatch,
                                                                                       capsys):
    """No lease is spent on a partial record: launch starts, in the order of PAPER_RUNS, the runs without a complete
    record whose schedules end before the deadline at the best known rates (a partial record runs again)."""
    started, state = launch_here(inputs, tmp_path, monkeypatch)
    out = capsys.readouterr().out
    assert "transformer_learned: recorded, skipped" in out and "transformer_learned" not in started
    assert started == [name for name in PAPER_RUNS if name in started]  # the priority order
    from experiments.params import load_params

    loaded = load_params(tmp_path / "params.yaml", profile="paper")
    rows = {row["name"]: row for row in gpu_plan.plan_rows(loaded, list(PAPER_RUNS), 20_000)}
    budget = gpu_plan.lease_budget(loaded["gpu_kit"])["train_s"]
    ends = gpu_plan.project([rows[name] for name in started], 1.15)
    assert started and "transformer_word" in started and all(end <= budget for end in ends.values())
    too_long = [name for name in PAPER_RUNS if gpu_plan.project([rows[name]], 1.15)[name] > budget]
    assert too_long and not set(too_long) & set(started)  # alone it would not end its schedule: never started
    assert state["plan"]["first_wave"] == started and state["deadline"] - state["started"] == budget


def test_checks_before_launch_in_the_lease_s_command_come_out_of_its_training(inputs, tmp_path, monkeypatch):
    """--began (the command's start, before its CUDA tests): the deadline counts from it, so the seconds the checks
    took are training the runs do not have, and a run that no longer ends its schedule is not started."""
    alone, _ = launch_here(inputs, tmp_path / "now", monkeypatch)
    began = time.time() - 200  # of the command's 300 s (no allowances): 100 s of training are left
    later, state = launch_here(inputs, tmp_path / "later", monkeypatch, "--began", str(began))
    assert state["started"] == pytest.approx(began) and state["deadline"] - state["started"] == 300
    assert set(later) < set(alone)  # fewer runs fit in what is left
    future, state = launch_here(inputs, tmp_path / "future", monkeypatch, "--began", str(time.time() + 500))
    assert future == alone and state["started"] <= time.time()  # a start in the future is launch's own


def launch_again(monkeypatch, *options: str, alive: bool) -> tuple[list[str], dict]:
    """launch once more where :func:`launch_here` launched (its folder, its params), the processes it started
    (pid 4242) ``alive`` or not, those started now alive: (the runs started, the state saved)."""
    started = []

    class Process:
        pid = 4343

    monkeypatch.setattr(gpu_runs, "spawn", lambda command, log, env: started.append(command[command.index("run") + 1])
                        or Process())
    monkeypatch.setattr(gpu_runs, "pid_alive", lambda pid, marker: alive if pid == 4242 else True)
    assert paper.main(["--params", "params.yaml", "launch", "--grace-s", "0", "--device", "cpu", *options]) == 0
    return started, json.loads(Path("gpu_runs/kit/state.json").read_text())


def deadline_passed(state_file: Path) -> dict:
    """The command of ``state_file`` as it is once its training deadline has passed (its records made elsewhere)."""
    state = json.loads(state_file.read_text())
    state["deadline"] = time.time() - 30
    state_file.write_text(json.dumps(state))
    return state


def test_a_later_launch_after_the_deadline_with_nothing_alive_starts_the_lease_s_next_command(inputs, tmp_path,
                                                                                               monkeypatch, capsys):
    """The machine stays warm: once the last command's deadline has passed and none of its runs is alive, a new
    launch keeps that command's state (state.1.json, measure.1.json), keeps the records, and starts command 2 with
    its own deadline from --began, capped by the lease left (--lease-left-s)."""
    first, _ = launch_here(inputs, tmp_path, monkeypatch, "--only", "transformer_word,wrn")
    assert first == ["transformer_word", "wrn"]
    state_dir = tmp_path / "gpu_runs/kit"
    (state_dir / "measure.json").write_text(json.dumps({"wrn": {"steps_per_second": 9.0}}))
    ended = deadline_passed(state_dir / "state.json")
    write_records(state_dir / "records", {"transformer_word": record_of("transformer_word"), "wrn": record_of("wrn")})
    capsys.readouterr()
    began = time.time() - 5
    later, state = launch_again(monkeypatch, "--began", str(began), "--lease-left-s", "150", "--only",
                                "transformer_word,wrn,conv,blstm", alive=False)
    out = capsys.readouterr().out
    assert later == ["conv", "blstm"] and "transformer_word: recorded, skipped" in out and "wrn: recorded" in out
    assert "command 2 of this lease (the last one's state kept as state.1.json)" in out
    assert json.loads((state_dir / "state.1.json").read_text()) == ended  # command 1's runs, as they were
    assert json.loads((state_dir / "measure.1.json").read_text()) == {"wrn": {"steps_per_second": 9.0}}
    assert not (state_dir / "measure.json").exists()  # command 2's rates never take command 1's measurement
    assert sorted(p.name for p in (state_dir / "records").glob("*.json")) == ["transformer_word.json", "wrn.json"]
    assert state["command"] == 2 and set(state["runs"]) == {"conv", "blstm"}
    assert state["lease_started"] == ended["started"] and state["started"] == pytest.approx(began)
    # no allowances here: the lease left, 150 s, is the deadline (the command alone would give 300)
    assert state["deadline"] - state["started"] == pytest.approx(150) and state["lease_left_s"] == 150
    assert state["plan"]["first_wave"] == ["conv", "blstm"]


def test_a_later_launch_while_runs_are_alive_skips_them_and_starts_no_new_command(inputs, tmp_path, monkeypatch,
                                                                                    capsys):
    first, before = launch_here(inputs, tmp_path, monkeypatch, "--only", "transformer_word,wrn")
    state_dir = tmp_path / "gpu_runs/kit"
    capsys.readouterr()
    # within the command's deadline: the runs alive are skipped, the others may start beside them in command 1
    again, state = launch_again(monkeypatch, "--only", "transformer_word,wrn", alive=True)
    out = capsys.readouterr().out
    assert again == [] and "transformer_word: still running (pid 4242), skipped" in out and "nothing to start" in out
    assert state["command"] == 1 and state["runs"] == before["runs"] and not (state_dir / "state.1.json").exists()
    # after it, with runs still going: nothing starts, the command stays, and launch says to collect them first
    deadline_passed(state_dir / "state.json")
    again, state = launch_again(monkeypatch, "--only", "transformer_word,wrn,conv", "--lease-left-s", "400",
                                alive=True)
    out = capsys.readouterr().out
    assert again == [] and "the training deadline of command 1 has passed" in out and "runs still going (transformer_word, wrn)" in out
    assert state["command"] == 1 and set(state["runs"]) == {"transformer_word", "wrn"}
    assert not (state_dir / "state.1.json").exists()


def test_the_lease_left_caps_a_command_s_training_less_scoring_collect_and_margin(inputs, tmp_path, monkeypatch):
    """--lease-left-s S (the device tool's budget_left_s): the deadline is no later than S less scoring, collect and
    margin after --began -- not less the machine's start or the unpacking; --train-budget-s still works under it."""
    allowance = {"machine_start": 50, "unpack": 10, "scoring": 20, "collect": 5, "margin": 15}
    # the command alone: unpacking 10 + training min(7200 - 100, 300 - 10 - 20 - 5 = 265) = 275 s after its start
    alone, state = launch_here(inputs, tmp_path / "alone", monkeypatch, allowance=allowance)
    assert state["deadline"] - state["started"] == pytest.approx(275) and state["lease_left_s"] is None
    capped, state = launch_here(inputs, tmp_path / "capped", monkeypatch, "--lease-left-s", "120", allowance=allowance)
    assert state["deadline"] - state["started"] == pytest.approx(120 - 20 - 5 - 15)
    assert capped and set(capped) < set(alone)  # fewer runs end their schedules in 80 s than in 275
    _, state = launch_here(inputs, tmp_path / "budget", monkeypatch, "--train-budget-s", "100", allowance=allowance)
    assert state["deadline"] - state["started"] == pytest.approx(10 + 100)
    _, state = launch_here(inputs, tmp_path / "both", monkeypatch, "--train-budget-s", "100", "--lease-left-s", "100",
                           allowance=allowance)
    assert state["deadline"] - state["started"] == pytest.approx(100 - 40)  # the lease left is the tighter
    budget = gpu_plan.lease_budget({"lease_s": 900, "command_s": 300, "allowance_s": allowance})
    assert gpu_plan.command_training_s(budget) == 275
    assert gpu_plan.command_training_s(budget, lease_left_s=1000) == 275
    assert gpu_plan.command_training_s(budget, lease_left_s=30) == 0  # nothing is left: no training
    assert gpu_plan.command_training_s(budget, later=True) == 10 + 265  # a later command: the one command's


#: FF2/FFA as in params: they read words, so they train eagerly whatever their settings ask (gpu_kit.graph)
EAGER_ONLY = {"kernels": 1000, "mflop_per_token": 100, "eager_only": "reads words"}
PROBING_KIT = {"assumed_steps_per_s": {"default": 5.0, "transformer": 2.0, "ffa": 0.8},
               "graph": {**GPU_KIT["graph"], "experiments": {**GPU_KIT["graph"]["experiments"], "ff2": EAGER_ONLY,
                                                             "ffa": EAGER_ONLY}}}
#: graph mode asked for every run, 100 s of training: transformer_word (graph, derived) and ff2 (eager, assumed 5
#: steps/s) end their schedules in it; transformer_word_literal's derived graph rate does not (its evaluations), and
#: ffa's assumed 0.8 steps/s does not
PROBING = ("--only", "transformer_word,transformer_word_literal,ff2,ffa", "--set", "compile=graph",
           "--train-budget-s", "100")


def launch_probing(inputs, tmp_path, monkeypatch, measured: dict[str, float], *options: str) -> tuple[list, dict]:
    """launch over :func:`prepare_launch`'s tiny kit with ``options``, nothing spawned: each command kept whole; a
    probe (``--slot-s``) writes into its log what a paused ``run`` prints (checkpointed at step 14) and ends once
    the runs are measured; the measurement gives the runs ``measured`` steps/s (else 100). (The commands, in order;
    the state saved.)"""
    prepare_launch(inputs, tmp_path, monkeypatch, **PROBING_KIT)
    commands, probes, ended = [], set(), []

    def spawn(command, log, env):
        commands.append(list(command))
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as handle:  # as gpu_runs.spawn writes it, and what the command then prints
            handle.write(f"$ {' '.join(command)}\n")
            if "--slot-s" in command:
                name = command[command.index("run") + 1]
                handle.write(f'train:  17%|  | 14/84 [00:03<00:10, 4.1step/s]\r{{"experiment": "{name}", "paused_at_'
                             f'step": 14, "resume": "run the same command again"}}\n{name}: paused; run the same '
                             'command again to go on\n')
                probes.add(5000 + len(commands))
        return type("Process", (), {"pid": 5000 + len(commands)})()

    def measure(names, state, logs, steps, timeout_s, utilization=None):
        ended.append(list(names))  # the probes checkpoint and exit at the end of their slots, just after
        return {name: {"name": name, "steps": steps + 1, "steps_per_second": measured.get(name, 100.0),
                       "gpu_memory_mib": None, "partial": False} for name in names}

    monkeypatch.setattr(gpu_runs, "spawn", spawn)
    monkeypatch.setattr(gpu_runs, "measure_running", measure)
    monkeypatch.setattr(gpu_runs, "pid_alive", lambda pid, marker: not (ended and pid in probes))
    assert paper.main(["--params", "params.yaml", "launch", "--grace-s", "0", "--device", "cpu", *options]) == 0
    state = json.loads((tmp_path / "gpu_runs/kit/state.json").read_text())
    assert not ended or ended[0] == [*state["plan"]["first_wave"], *(state["plan"].get("probes") or {})]
    return commands, state


def started(commands: list) -> list[tuple[str, str | None]]:
    """(run, its --slot-s or None) of each command, in order."""
    return [(c[c.index("run") + 1], c[c.index("--slot-s") + 1] if "--slot-s" in c else None) for c in commands]


def test_launch_probes_only_waiting_runs_with_assumed_rates_and_starts_one_that_then_fits(inputs, tmp_path,
                                                                                          monkeypatch, capsys):
    """With --measure-steps, a run the first wave does not start whose rate is assumed (never measured, not derived)
    is started as a probe beside it: the same command with --slot-s (its start + 1.5 x the steps measured at its
    assumed rate: 5 + 1.5 x 8 / 0.8 = 20 s). Its measured rate enters the second wave's plan; at 10 steps/s it ends
    its schedule, so the second wave starts it again without --slot-s (it resumes from the probe's checkpoint, the
    same --runs folder). A run whose rate is derived is never probed."""
    commands, state = launch_probing(inputs, tmp_path, monkeypatch, {"ffa": 10.0}, *PROBING, "--measure-steps", "8")
    out = capsys.readouterr().out
    assert started(commands) == [("transformer_word", None), ("ff2", None), ("ffa", "20"), ("ffa", None)]
    assert "transformer_word_literal" not in [name for name, _ in started(commands)]  # derived: waits, unprobed
    assert state["plan"]["first_wave"] == ["transformer_word", "ff2"] and state["plan"]["second_wave"] == ["ffa"]
    assert state["plan"]["probes"] == {"ffa": 20.0}
    probe, again = (c for c in commands if c[c.index("run") + 1] == "ffa")

    def without_budget(command: list) -> list:
        return [part for i, part in enumerate(command)
                if part not in ("--slot-s", "--stop-after-s") and command[i - 1] not in ("--slot-s", "--stop-after-s")]
    assert without_budget(probe) == without_budget(again) and "--stop-after-s" in probe  # the same run, same folder
    assert again[again.index("--runs") + 1] == "gpu_runs/paper"
    assert "ffa: probed (pid" in out and "its rate, 0.8 steps/s, is assumed (never measured on a GPU)" in out
    assert "`launch --measure-steps 8` probes ffa (20 s)" in out
    assert "ffa: started (pid" in out and "resuming from its probe's checkpoint" in out
    # the second wave planned ffa at its measured rate, in the mode it trains in (eager: it reads words)
    assert "| ffa | 8 x 30 | 84 | eager (eager only: reads words) | 10.0 (measured, this lease's first steps) |" in out
    assert state["runs"]["ffa"].get("probe") is None and state["plan"]["runs"]["ffa"]["wave"] == 2
    record = gpu_rates.lease_record(state, json.loads((tmp_path / "gpu_runs/kit/measure.json").read_text()), {},
                                    gpu="NVIDIA H200", software={}, git=None)
    assert record["runs"]["ffa"]["probe"] == {"slot_s": 20.0, "started_again": True}
    assert record["runs"]["ffa"]["first_steps"]["runs_beside"] == 2  # the first wave's two beside it
    # without --measure-steps nothing is probed
    commands, state = launch_probing(inputs, tmp_path / "plain", monkeypatch, {}, *PROBING)
    assert started(commands) == [("transformer_word", None), ("ff2", None)] and "probes" not in state["plan"]


def test_a_probe_that_does_not_fit_stays_checkpointed_says_so_and_its_rate_plans_the_next_lease(inputs, tmp_path,
                                                                                                 monkeypatch, capsys):
    """At 1 step/s ffa still does not end its schedule: the second wave leaves it. Its status is probed (the step
    it checkpointed at), not failed; the lease's rates carry its first steps' rate, marked as a probe's, in the mode
    it trained (eager), so that the next plan takes it as measured; a probe still running counts as a run."""
    from paper_runs import lease as gpu_lease

    commands, state = launch_probing(inputs, tmp_path, monkeypatch, {"ffa": 1.0}, *PROBING, "--measure-steps", "8")
    out = capsys.readouterr().out
    assert started(commands) == [("transformer_word", None), ("ff2", None), ("ffa", "20")]
    assert state["plan"]["second_wave"] == [] and state["runs"]["ffa"]["probe"] is True
    assert "ffa: probed at 1.0 steps/s; at it the run does not end its schedule in what is left" in out
    assert "3 runs started in command 1 of this lease (1 of them only probed: checkpointed, no record)" in out
    state_dir = tmp_path / "gpu_runs/kit"
    status = gpu_runs.run_status("ffa", [state_dir / "records"], state, state_dir / "logs")
    assert status["status"] == "probed (checkpointed at step 14)"
    monkeypatch.setattr(gpu_runs, "pid_alive", lambda pid, marker: False)
    (state_dir / "logs/ff2.log").write_text("train:  17%|  | 14/84 [00:03<00:10, 4.1step/s]\n")
    assert gpu_runs.run_status("ff2", [state_dir / "records"], state, state_dir / "logs")["status"] == "failed"
    crashed = tmp_path / "crashed"  # a probe that died after the last command written to its log, without pausing
    crashed.mkdir()
    (crashed / "ffa.log").write_text((state_dir / "logs/ffa.log").read_text() + "$ python -m paper_runs run ffa "
                                     "--slot-s 20\nTraceback (most recent call last):\n")
    assert gpu_runs.run_status("ffa", [state_dir / "records"], state, crashed)["status"] == "failed"
    # alive, a probe is a run like the others: launch leaves it alone and the collect waits for it
    monkeypatch.setattr(gpu_runs, "pid_alive", lambda pid, marker: True)
    assert gpu_runs.run_status("ffa", [state_dir / "records"], state, state_dir / "logs")["status"] == "running"
    assert "ffa" in gpu_runs.alive_runs(state)
    assert gpu_runs.runs_to_start(["ffa"], state, [state_dir / "records"])[1] == {
        "ffa": f"still running (pid {state['runs']['ffa']['pid']})"}
    monkeypatch.setattr(gpu_runs, "pid_alive", lambda pid, marker: False)
    assert gpu_runs.runs_to_start(["ffa"], state, [state_dir / "records"])[0] == ["ffa"]  # ended: may start again
    # the lease's rates: the probe's rate, marked, in the mode it trained; the next plan takes it as measured
    assert gpu_lease.collect_lease(GPU_KIT, state_dir, tmp_path / "metrics/paper", tmp_path / "out/r.tar.gz", 0) == 1
    import tarfile

    with tarfile.open(tmp_path / "out/r.tar.gz") as archive:
        rates = json.loads(archive.extractfile("gpu_kit_status/rates.json").read())
        table = archive.extractfile("gpu_kit_status/status.md").read().decode()
    assert "| ffa | probed (checkpointed at step 14) |" in table and "1 probed" in table
    ffa = rates["runs"]["ffa"]
    assert ffa["probe"] == {"slot_s": 20.0, "started_again": False} and rates["probes"] == ["ffa"]
    assert ffa["first_steps"]["steps_per_s"] == 1.0 and (ffa["mode"], ffa["mode_from"]) == ("eager", "eager only")
    assert ffa["requested_mode"] == "graph" and "whole_run" not in ffa
    known = gpu_rates.known_rates([{**rates, "device": "NVIDIA H200"}])
    assert known["rates"][("ffa", "eager")]["steps_per_s"] == 1.0
    from experiments.params import load_params

    rows = gpu_plan.plan_rows(load_params(tmp_path / "params.yaml", profile="paper"), ["ffa"], 20_000, known=known,
                              settings=["compile=graph"])
    assert rows[0]["steps_per_s"] == 1.0 and rows[0]["rates"]["eager"][1].startswith("measured")
    assert gpu_plan.probe_plan(rows, [], kit=GPU_KIT, steps=8, budget_s=100, overhead=1.15) == {}  # measured now


def test_two_commands_of_a_lease_a_minute_apart_file_two_rates_files(tmp_path, monkeypatch):
    """Each command of a lease collects its own rates; import names them by the command's start to the second, so
    two commands begun within one minute keep both (files named to the minute, of earlier leases, are still read,
    in the order their commands began)."""
    from paper_runs import lease as gpu_lease, rates as gpu_rates

    monkeypatch.chdir(tmp_path)
    rates_dir, began = tmp_path / "leases", 1_700_000_000.0  # 2023-11-14T22:13:20Z
    older = {"lease": "20231114T2213Z_cpu", "started": "2023-11-14T22:13:05Z", "device": None, "runs": {}}
    rates_dir.mkdir()
    (rates_dir / "20231114T2213Z_cpu.json").write_text(json.dumps(older))
    for command, started in ((1, began), (2, began + 25)):
        state_dir = tmp_path / f"machine{command}"
        state_dir.mkdir()
        state = {"started": started, "deadline": started + 100, "command": command, "lease_started": began,
                 "runs": {}, "plan": {"runs": {}}}
        gpu_runs.save_state(state_dir / "state.json", state)
        tarball = tmp_path / f"out{command}" / "paper_results.tar.gz"
        assert gpu_lease.collect_lease(GPU_KIT, state_dir, tmp_path / "repo_records", tarball, 0) == 0
        assert paper.main(["--records", str(tmp_path / "records"), "import", str(tarball), "--status-dir",
                           str(tmp_path / "status"), "--rates-dir", str(rates_dir)]) == 0
    names = sorted(path.name for path in rates_dir.glob("*.json"))
    assert names == ["20231114T221320Z_cpu.json", "20231114T221345Z_cpu.json", "20231114T2213Z_cpu.json"]
    leases = gpu_rates.load_leases(rates_dir)
    assert [lease["lease"] for lease in leases] == ["20231114T2213Z_cpu", "20231114T221320Z_cpu",
                                                   "20231114T221345Z_cpu"]  # by start, not by name
    assert [(lease.get("command"), lease.get("lease_started")) for lease in leases[1:]] == [
        (1, "2023-11-14T22:13:20Z"), (2, "2023-11-14T22:13:20Z")]


def test_a_run_s_environment_lets_it_outlive_the_launch_and_share_the_cores(tmp_path):
    env = gpu_runs.child_environment(threads=2, site_dir=tmp_path / "site", git_commit="abc")
    assert env["PUNCTUATION_KEEP_TRAINER"] == "1"  # else the trainer dies with the launch (exit_with_parent)
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "2"
    assert env["PYTHONPATH"].split(":")[0] == str((tmp_path / "site").resolve())


FAKE_RUN = """
import sys, time
rate, last = float(sys.argv[1]), int(sys.argv[2])
shown = sys.argv[3] if sys.argv[3:] and not sys.argv[3].startswith("paper_runs") else "99.00step/s"
time.sleep(0.5)  # start-up, which the measurement must not count
for step in range(1, last + 1):
    time.sleep(1 / rate)
    print(f"train:  1%|  | {step}/9000 [00:01<00:10, {shown}]", end="\\r", flush=True)
time.sleep(60)
"""


def test_the_measurement_is_the_runs_own_first_steps(tmp_path):
    """launch --measure-steps: each started run's steps/s over its first steps, read off its log while it trains;
    a run that dies without a step is None, one still short at the timeout has its rate so far."""
    logs, state = tmp_path / "logs", {"runs": {}}
    runs = {"fast": (20.0, 40), "slow": (4.0, 1000), "dead": None}
    processes = []
    for name, fake in runs.items():
        code = FAKE_RUN if fake else "raise SystemExit(1)"
        args = [str(x) for x in fake] if fake else []
        process = gpu_runs.spawn([sys.executable, "-c", code, *args, "paper_runs", "run", name],
                                 logs / f"{name}.log", {})
        processes.append(process)
        state["runs"][name] = {"pid": process.pid, "marker": ["paper_runs", "run", name]}
    try:
        measured = gpu_runs.measure_running(list(runs), state, logs, steps=30, timeout_s=6.0, poll_s=0.2)
    finally:
        for process in processes:
            process.kill()
            process.wait(timeout=30)
    assert measured["dead"] is None
    fast, slow = measured["fast"], measured["slow"]
    assert fast["steps"] >= 30 and not fast["partial"]
    assert 12 <= fast["steps_per_second"] <= 21  # its own rate (sleeps plus overhead), not tqdm's 99 or start-up
    assert slow["partial"] and 5 <= slow["steps"] < 30 and 2.5 <= slow["steps_per_second"] <= 4.2


def test_a_run_that_passes_the_first_marks_between_two_looks_is_measured_from_its_steps_not_its_log_s_rate(
        tmp_path):
    """On the H200, WRN passed step 20 and step 200 between two looks while tqdm still showed its first step's
    8.58 s/step (the capture): the measurement read 0.12 steps/s for a run of 131. It now counts ``steps`` more
    steps from its first reading."""
    logs, state = tmp_path / "logs", {"runs": {}}
    process = gpu_runs.spawn([sys.executable, "-c", FAKE_RUN, "400", "3000", "8.58s/step", "paper_runs", "run",
                              "jumpy"], logs / "jumpy.log", {})
    state["runs"]["jumpy"] = {"pid": process.pid, "marker": ["paper_runs", "run", "jumpy"]}
    try:
        measured = gpu_runs.measure_running(["jumpy"], state, logs, steps=30, timeout_s=8.0, poll_s=0.5)
    finally:
        process.kill()
        process.wait(timeout=30)
    jumpy = measured["jumpy"]
    assert not jumpy["partial"] and jumpy["steps"] >= 30
    assert 100 <= jumpy["steps_per_second"] <= 420  # its own steps over the looks' seconds, never 1 / 8.58


def test_progress_comes_from_the_log_and_a_finished_process_is_not_alive(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("train:   1%|          | 12/900 [00:03<03:40,  4.02step/s]\rtrain:   2%|2   | 20/900 "
                   "[00:05<03:38,  1.25s/step, loss=0.52]\n")
    assert gpu_runs.log_progress(log) == {"step": 20, "steps": 900, "steps_per_s": 0.8}
    process = gpu_runs.spawn([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "p.log", {})
    assert gpu_runs.pid_alive(process.pid, [sys.executable])
    assert not gpu_runs.pid_alive(process.pid, ["paper_runs"])  # another program under that id is not ours
    process.kill()
    process.wait(timeout=30)
    assert not gpu_runs.pid_alive(process.pid, [sys.executable])


def test_a_run_is_alive_the_moment_spawn_returns(tmp_path):
    """Linux closes the pipe Popen waits on before it writes the new program's arguments: read at once, the
    cmdline could be empty and the run called dead (4 of 300 spawns here, once in CI). spawn waits them out."""
    for _ in range(100):
        process = gpu_runs.spawn(["sleep", "30"], tmp_path / "p.log", {"PATH": os.environ["PATH"]})
        try:
            assert Path(f"/proc/{process.pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"30"]
            assert gpu_runs.pid_alive(process.pid, ["sleep", "30"])
        finally:
            process.kill()
            process.wait(timeout=30)


@pytest.mark.slow  # ~3-5 min on one core: 2 x 12 processes, each starting torch; the whole lease, rehearsed
def test_the_rehearsal_runs_the_kit_as_the_gpu_machine_would(inputs, kit, tmp_path):
    """Only what travels, in an empty folder with no ../shared and no network: the lease's one command (launch,
    measure, collect), collect until every run is recorded, the tarball within its limits, a second launch starting
    nothing, the import of records and rates."""
    from paper_runs import rehearsal

    python = rehearsal.default_python()
    settings = ["max_steps=4", *rehearsal.graph_settings()]  # graph mode asked, as the paper profile does
    report = rehearsal.rehearse(
        repo=REPO, kit=kit, work=tmp_path / "work", python=python, params=inputs / "params.yaml",
        settings=settings, measure_steps=2, timeout_s=1200)
    assert report["problems"] == [], "\n".join(report["problems"] + report["output"][-40:])
    assert sorted(report["records"]) == sorted(PAPER_RUNS)
    assert report["tarball_bytes"] <= 16 * 2**20 and report["travel_bytes"] <= 64 * 2**20
    assert all(r["run"]["steps_completed"] == 4 and r["run"]["kit"]["git"] for r in report["records"].values())
    if "compile=graph" in settings:  # asked for graph mode on a CPU: each record says it trained eagerly, and why
        assert all(r["run"]["step_mode"] == "eager" and r["run"]["step_mode_reason"]
                   for r in report["records"].values())
    # the records were made by the rehearsal's interpreter (GPU_KIT_REHEARSAL_PYTHON: a venv with the GPU machine's
    # torch 2.11.0 and transformers 5.17.0, made by `python -m paper_runs.rehearsal --make-venv DIR`)
    versions = subprocess.run([python, "-c", "import torch, transformers; print(torch.__version__.split('+')[0], "
                               "transformers.__version__)"], capture_output=True, text=True, check=True).stdout.split()
    assert all([r["run"]["software"]["torch"].split("+")[0], r["run"]["software"]["transformers"]] == versions
               for r in report["records"].values()), versions
    literal = report["records"]["transformer_word_literal"]["run"]["train"]
    assert literal["seq_len"] == 100 and literal["warmup_steps"] == 4000  # the thirteenth run's own reading
    assert sorted(report["rates"]["runs"]) == sorted(PAPER_RUNS)
    assert read_index(kit / KIT_FILE)["encoder"]["package"] == ENCODER_PACKAGE
