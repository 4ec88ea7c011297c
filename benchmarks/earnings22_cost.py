"""What Earnings-22 costs the default pipeline: the stages it added or changed, and the ones it replaced, timed back
to back on one machine.

    python -m benchmarks.earnings22_cost [--rounds 1] [--work runs/earnings22_cost] [--json FILE]

Earnings-22 may add at most 10 minutes to the default pipeline. Two complete ``dvc repro`` runs back to back take
hours on two cores; most of their stages are the same work before and after. This runs only the stages that differ:

=========  =======================================================================================================
arm        stages (each as its DVC command runs it: ``python -m pipeline.X`` with the stage's arguments)
=========  =======================================================================================================
before     ``fit_pauses`` without the mix; ``tune@minilm_word_pauses`` and ``tune@minilm_word_pauses_control``
           (the MiniLM speech model and its control on TED's training set, simulated cues: the tunings of 0c3f991^,
           before Earnings-22)
after      ``prepare_earnings22``; ``fit_pauses`` with the mix; ``embed_set@word_pauses_mix`` and
           ``embed_set@word_pauses_mix_control``; ``tune@minilm_word_pauses_mix`` and
           ``tune@minilm_word_pauses_mix_control``; ``evaluate_earnings22``
=========  =======================================================================================================

Not run, the same work in both: every other stage; ``evaluate_tuning`` (two MiniLM tunings on Ref and ASR either
way) and ``evaluate_real`` (the same models' count on the same talks). The TED feature sets the ``before`` tunings
read (``word_pauses``, ``word_pauses_control``) are built once, untimed: the BLSTM tunings read them in both.

Everything is written under ``--work`` (the pipeline's own outputs are read, never written). One process at a
time; the arms alternate, ``--rounds`` times (before, after, before, ...). Prints one line per stage and each arm's
total, and the difference. Compare only figures of one run: a machine's speed is its own (``machine``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from experiments.numerics import pin_numerics

pin_numerics()  # the stages' numerics (experiments/numerics.py), inherited by every command run here

from benchmarks.machine import this_machine  # noqa: E402
from benchmarks.timed import run_timed  # noqa: E402

PYTHON = sys.executable
BEFORE_TUNINGS = ("minilm_word_pauses", "minilm_word_pauses_control")
AFTER_TUNINGS = ("minilm_word_pauses_mix", "minilm_word_pauses_mix_control")


def write_params(params_path: Path, work: Path) -> dict[str, Path]:
    """The params files of the two arms under ``work``: ``before`` without the mix and with the TED tunings,
    ``after`` as the pipeline's, its mix feature sets read from the arm's own ``fit_pauses`` output."""
    import yaml

    from comparisons.spec import apply_overrides, mapping_overrides

    params = yaml.safe_load(params_path.read_text(encoding="utf-8"))  # as written: each stage resolves its profile
    tuning = params["tunings"][AFTER_TUNINGS[0]]
    before = {"pauses": {"mix": None}, "tunings": {f"+{name}": {**tuning, "features": name.removeprefix("minilm_")}
                                                   for name in BEFORE_TUNINGS}}
    mix = work / "after" / "pauses" / "mix"
    after = {"embed": {"feature_sets": {
        name: {"prepared": str(mix / "prepared"), "speech_source": {"path": str(mix / variant)}}
        for name, variant in (("word_pauses_mix", "timed"), ("word_pauses_mix_control", "control"))}}}
    paths = {}
    for arm, overrides in (("before", before), ("after", after)):
        paths[arm] = work / arm / "params.yaml"
        paths[arm].parent.mkdir(parents=True, exist_ok=True)
        changed = apply_overrides(params, mapping_overrides(overrides))
        paths[arm].write_text(yaml.safe_dump(changed, sort_keys=False), encoding="utf-8")
    return paths


def embed(params: Path, name: str, out: Path) -> list[str]:
    return [PYTHON, "-m", "pipeline.embed", "--params", str(params), "--feature-set", name, "--prepared",
            "data/prepared", "--out", str(out / "feature_sets" / name), "--metrics", str(out / f"{name}.json")]


def tune(params: Path, name: str, features: Path, out: Path) -> list[str]:
    return [PYTHON, "-m", "pipeline.train", "--tuning", name, "--params", str(params), "--features", str(features),
            "--artifacts", str(out / "variant_artifacts" / name), "--checkpoints", str(out / "checkpoints" / name),
            "--metrics", str(out / "metrics" / name)]


def arm_stages(arm: str, params: Path, work: Path, shared: Path) -> list[tuple[str, list[str]]]:
    """The arm's stages in pipeline order, each ``(stage, argv)``, writing under ``work/arm``."""
    out = work / arm
    fit = [PYTHON, "-m", "pipeline.fit_pauses", "--params", str(params), "--prepared", "data/prepared", "--out",
           str(out / "pauses"), "--metrics", str(out / "pauses.json")]
    if arm == "before":
        return [("fit_pauses", fit)] + [
            (f"tune@{name}", tune(params, name, shared / "feature_sets" / name.removeprefix("minilm_"), out))
            for name in BEFORE_TUNINGS]
    earnings22 = out / "earnings22"
    return [
        ("prepare_earnings22", [PYTHON, "-m", "pipeline.prepare_earnings22", "--params", str(params), "--out",
                                str(earnings22), "--metrics", str(out / "earnings22.json"), "--report",
                                str(out / "earnings22_report.md"), "--figures", str(out / "figures"), "--quiet"]),
        ("fit_pauses", fit + ["--earnings22", str(earnings22)]),
        *[(f"embed_set@{name}", embed(params, name, out)) for name in ("word_pauses_mix", "word_pauses_mix_control")],
        *[(f"tune@{name}", tune(params, name, out / "feature_sets" / name.removeprefix("minilm_"), out))
          for name in AFTER_TUNINGS],
        ("evaluate_earnings22", [PYTHON, "-m", "pipeline.evaluate_real", "--params", str(params), "--earnings22",
                                 str(earnings22 / "calls" / "test"), "--out", str(out / "earnings22_test.md"),
                                 "--metrics", str(out / "earnings22_test.json")]),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--work", type=Path, default=Path("runs/earnings22_cost"))
    parser.add_argument("--rounds", type=int, default=1, help="times each arm runs, alternating")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.work.exists():
        shutil.rmtree(args.work)
    paths = write_params(args.params, args.work)
    shared = args.work / "shared"
    shared.mkdir(parents=True)
    for name in ("word_pauses", "word_pauses_control"):  # read by the before arm; built in both pipelines
        run_timed(embed(paths["before"], name, shared), shared / f"embed_{name}.log")
    figures: dict[str, Any] = {"machine": this_machine(), "rounds": []}
    for round_index in range(args.rounds):
        timed: dict[str, dict[str, float]] = {}
        for arm in ("before", "after"):
            stages = arm_stages(arm, paths[arm], args.work, shared)
            for path in (args.work / arm).iterdir():  # every round from nothing: a stage reuses what it finds
                if path != paths[arm]:
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
            timed[arm] = {}
            for stage, command in stages:
                timed[arm][stage] = round(run_timed(command, args.work / arm / f"{stage}.log"), 1)
                print(json.dumps({"round": round_index + 1, "arm": arm, "stage": stage, "s": timed[arm][stage]}),
                      flush=True)
        totals = {arm: round(sum(stages.values()), 1) for arm, stages in timed.items()}
        figures["rounds"].append({"stages": timed, "totals_s": totals,
                                  "after_minus_before_s": round(totals["after"] - totals["before"], 1)})
        print(json.dumps({"round": round_index + 1, "totals_s": totals,
                          "after_minus_before_min": round((totals["after"] - totals["before"]) / 60, 2)}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
