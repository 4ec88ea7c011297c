"""The three ASR-robustness levers, each alone and together, on dev: `punctuate`'s text model trained as the pipeline
trained it (experiment ``minilm``, then its tuning ``minilm_words``; a run of :data:`FIRST_PHASE_ONLY`, as the
pipeline trains it since ``steps_for_words_arm``, the fine-tuning alone), with the same seed and step budget per run.

    python scripts/asr_levers.py [--runs baseline augment jitter combine all] [--seeds 1 2] [--report-only]
                                 [--features data/features] [--tuning-features data/features]
                                 [--prepared data/prepared] [--work runs/asr_levers] [--out reports/asr_levers]
                                 [--splits dev] [--train-set KEY=VALUE ...] [--model-set KEY=VALUE ...]
                                 [--pause-after-s SECONDS]

Each run is a set of ``train`` settings (:data:`RUNS`) put over both phases -- the fine-tuning of ``minilm`` and the
400-step head tuning of ``minilm_words`` that starts from it -- as setting them in ``experiment_defs.minilm.train``
would (a tuning inherits its experiment's settings). Everything else is params.yaml's (``--profile``, default the
file's own): the same seed, steps and data for every run. The levers:

* ``augment``: ASR-style noise, rate 0.15 with the paper's shares 0.4 / 0.4 / 0.2 (Alam et al. 2020; fixed before
  any test figure is seen: ``training.batches.AsrNoise``);
* ``jitter``: every training window's start moved by up to a quarter window, beyond the random offset each epoch
  already has (Shi et al. 2021; ``training.batches.epoch_plan``);
* ``combine``: a token's label is the arg-max of its logits summed over the overlapping windows (Courtland et al.
  2020; ``inference.windows``), at the evaluate stride (two windows per token) and, ``combine_stride25``, at half
  of it (four per token, twice the decoding work). Recorded in the model directory: dev model selection, the
  evaluate stage and ``punctuate`` all decode so.

Every run is measured against one baseline, the fine-tuning of 1,000 steps the levers were first measured with
(:data:`STUDY_BASELINE`, under each run's own settings), whatever params.yaml holds now. Three runs spend training
time instead: ``steps1350`` the 5 minutes the issue lets the default pipeline grow (kept, like a lever, only when it
raised dev F1 on every seed of at least two within :data:`MAX_EXTRA_TRAINING_S` of both phases' wall time; the
default until ``nodropout1600`` replaced it), ``batch8`` the same words in half-size batches at twice the steps;
``steps2x`` and ``steps3x`` are
**budget points**, the fine-tuning at 2,000 steps and its whole two-epoch schedule of 2,626, what the issue's
targets would cost in training compute (:data:`TRAINING_COST`): no verdict keeps them, and their Ref and ASR (the
figures the targets are stated in) choose nothing.

A run of :data:`TRAIN_TOKENS` reads other training text in its fine-tuning: ``fresh_data`` the prepare stage's draw
of talks run on to 4.2M tokens (``trainset.draws``, as stage ``draw@long`` builds it, under ``--work``), one epoch of
it in the steps of two over the 2.1M set.

A run may set model settings too, over both phases' models (``{"model": {...}}``): ``nodropout`` turns dropout off
(the encoder's hidden and attention dropout, the head's), which makes a step cheaper, and ``nodropout1600`` spends
what that saves on steps within ``steps1350``'s minutes (kept, and the default since). A run made to replace the
default is measured against it, seed by seed (:data:`REFERENCE`), and still against the baseline's time. Wall times
are compared only between runs trained on one machine (each result names its own, :func:`this_machine`); a run with
a reference trained where no baseline ran is timed from the reference's time and the step costs of both measured on
one machine (``--out/step_costs.jsonl``, lines of ``benchmarks.train_speed``, matched by the model settings they
resolved to: :func:`estimated_extra_s`). A run doing its reference's work in other amounts (the same model, other
steps or dev evaluations: ``evals_to_steps``) is timed at its own measured rates, its work against the reference's
(:func:`work_beyond_s`): one machine label runs at another speed on another day. A run of :data:`FIRST_PHASE_OF`
trains nothing: it scores another run's first-phase model (``nodropout1600_first_phase``: is the head's second phase
still worth having without dropout?). A run of :data:`RESUMES` differs from another only in which weights each phase
keeps (``keep_last``: the last step's instead of the best dev evaluation's): it takes that run's finished first
phase and trains only the second; ``evals_to_steps`` spends the first phase's dev evaluations, which choose nothing
once ``keep: last``, on steps. The script pins the pipeline's numerics (``experiments.numerics``), so a run here and
the pipeline's model of the same settings are the same bytes.

Every trained model is scored on ``--splits`` (dev2012; add ``ref asr`` only for the setting chosen on dev: the ASR
test set is not a development set) by the evaluate stage's own function (``evaluation.benchmark.evaluate_model``:
``punctuate``'s decoding path). Each run's result is a JSON file in ``--out/runs`` (a run whose file exists is not
run again, and an interrupted training resumes from its checkpoint in ``--work``; ``--pause-after-s`` pauses one
cleanly for a run longer than a session, its wall time counted; a test split it lacks is scored on its model);
``--out/levers.json``, ``--out/levers.md`` and its figure ``--out/levers.png`` hold them all, each beside the
baseline of the same seed, and what is kept (:func:`verdicts`). ``--report-only`` writes them again from the
finished runs. Needs the default pipeline's ``data/features`` and ``data/prepared`` (the word features of the
training set, which the head's tuning reads: ``data/feature_sets/word`` holds the same bytes where a tuning on
words builds it). On 2 CPU cores a run takes about as long as ``minilm`` and ``minilm_words`` in
``dvc repro`` (~16 min at 1,000 steps, ~1 h at 1,600) plus its scoring.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.numerics import cpu_flags, cpu_model, pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's kernels (before torch loads): the pipeline's model and a run here are the same bytes

from corpus.io import atomic_write_text  # noqa: E402
from experiments.params import experiment_config, load_params, merged, tuning_config  # noqa: E402
from training.config import Budget, parse_setting  # noqa: E402

EXPERIMENT, TUNING = "minilm", "minilm_words"
#: the tuning whose model and train settings the study's second phase takes (params no longer trains ``minilm_words``
#: since ``steps_for_words_arm``; the MiniLM tunings share one model and train setting, tests/test_realspeech.py)
TUNING_SETTINGS_OF = "minilm_word_pauses"
#: the default every lever was measured against (params.yaml's fine-tuning before ``steps1350`` was kept; dev
#: evaluated every 100 steps until ``evals_to_steps`` was kept): each run is params.yaml with these settings, then
#: its own, so a finished run means what it meant when it ran
STUDY_BASELINE: dict[str, dict[str, Any]] = {EXPERIMENT: {"max_steps": 1000, "eval_every_steps": 100}}
#: the model settings of that default, under each run's own (dropout was on until ``nodropout1600`` was kept; the
#: fine-tuning trained every layer until ``freeze_first_layer`` was kept: a setting keyed by that phase alone)
STUDY_MODEL: dict[str, Any] = {"dropout": 0.1, EXPERIMENT: {"freeze_layers": 0}}
#: the train settings of that default over both phases, under each run's own (each phase kept its best dev
#: evaluation's weights until ``keep_last`` was kept; both had the profile's two epochs until ``fresh_data`` was kept)
STUDY_TRAIN: dict[str, Any] = {"keep": "best", "epochs": 2}
#: the settings of ``freeze_whole_schedule`` (today's default), which the levers tried on that default extend
FREEZE_WHOLE_SCHEDULE: dict[str, Any] = {"model": {"dropout": 0.0, EXPERIMENT: {"freeze_layers": 1}},
                                         EXPERIMENT: {"max_steps": 2626, "eval_every_steps": 540}, "keep": "last"}
#: name -> (what it is, train settings over both phases)
RUNS: dict[str, tuple[str, dict[str, Any]]] = {
    "baseline": ("params.yaml with the study's 1,000 fine-tuning steps, every lever off (the default until "
                 "`steps1350` was kept)", {}),
    "augment": ("ASR-style noise: rate 0.15, substitute / delete / insert 0.4 / 0.4 / 0.2", {"augment_rate": 0.15}),
    "jitter": ("every window's start jittered by up to 25 tokens", {"window_jitter": 25}),
    "combine": ("logits summed over the overlapping windows (stride 50: 2 per token)", {"decode_combine": "sum"}),
    "combine_stride25": ("logits summed, windows every 25 tokens (4 per token)",
                         {"decode_combine": "sum", "decode_stride": 25}),
    "all": ("augment + jitter + combine", {"augment_rate": 0.15, "window_jitter": 25, "decode_combine": "sum"}),
    "combine_decode": ("the baseline's model decoded with logits summed (stride 50), no retraining",
                       {"decode_combine": "sum"}),
    "combine_decode_stride25": ("the baseline's model decoded with logits summed, windows every 25 tokens",
                                {"decode_combine": "sum", "decode_stride": 25}),
    # the same words seen in smaller, more frequent updates: not more compute, but more host work per word
    "batch8": ("half the batch (8 windows), twice the steps (2,000, warm-up 100): the same words seen, the same "
               "peak rate", {EXPERIMENT: {"batch_size": 8, "max_steps": 2000, "warmup_steps": 100}}),
    # the pipeline's 5-minute allowance spent on the fine-tuning: ~0.75 s a step with its dev evaluations
    "steps1350": ("the fine-tuning 1,350 steps: the 5 minutes the issue allows the pipeline to grow, spent on "
                  "training", {EXPERIMENT: {"max_steps": 1350}}),
    # dropout off: no masks to draw (~10 % of a step) and the encoder's attention on SDPA's fused kernel (measured
    # over 60 steps, twice each in turn: 1.85 against 2.10 s a step, -12 %, step_costs.jsonl); in a fine-tuning of
    # one epoch, regularising may cost
    "nodropout": ("dropout off in both phases (the encoder's hidden and attention dropout, the head's): the study's "
                  "1,000 steps", {"model": {"dropout": 0.0}}),
    "nodropout1600": ("dropout off in both phases and 1,600 fine-tuning steps: what `steps1350`'s minutes buy "
                      "without dropout (-12 % a step), measured against `steps1350`",
                      {"model": {"dropout": 0.0}, EXPERIMENT: {"max_steps": 1600}}),
    # no training: is the head's second phase still worth having once the fine-tuning has no dropout? (with dropout
    # it raised Ref / ASR by +0.7 / +1.7; without, the first phase alone scored higher on both, which chooses nothing)
    # (its settings are its source run's, which its result records: :data:`FIRST_PHASE_OF`)
    "nodropout1600_first_phase": ("`nodropout1600`'s first phase alone (its fine-tuned `minilm`, before the head's "
                                  "second phase), scored as it is: no training, measured against `nodropout1600`",
                                  {}),
    # which weights each phase keeps: with the rate annealed to zero, the best of 16 evaluations on 10,000 dev tokens
    # is a noisy choice (both seeds of `nodropout1600` kept step 1,400 of 1,600); no training of its own for the
    # first phase (:data:`RESUMES`)
    "keep_last": ("`nodropout1600` keeping each phase's last weights instead of its best dev evaluation's (every 100 "
                  "steps on 10,000 dev tokens): its first phase not trained again but kept the new way, the "
                  "head's second phase trained again from it, measured against `nodropout1600`",
                  {"model": {"dropout": 0.0}, EXPERIMENT: {"max_steps": 1600}, "keep": "last"}),
    # with `keep: last` the first phase's dev evaluations choose nothing: 17 of them (every 100 steps and at the
    # epoch's end, step 1,313; 12 s each on 2 cores, 197 s of 3,310) only draw its learning curve. Every 420 steps
    # (5 with the epoch's end and the run's) keep the curve's shape; at 16 saved the 148 s would buy 76 steps at
    # 1.93 s a step, rounded to 80 (12 are saved: the epoch's end was overlooked when the run was set)
    "evals_to_steps": ("`keep_last` with 5 dev evaluations in its first phase instead of 17 (every 420 steps, the "
                       "epoch's end, the run's end) and the time they took spent on steps: 1,680 instead of 1,600, "
                       "measured against `keep_last`",
                       {"model": {"dropout": 0.0}, EXPERIMENT: {"max_steps": 1680, "eval_every_steps": 420},
                        "keep": "last"}),
    # a cheaper step bought with the frozen embeddings and first layer (no backward through them, and Adam no longer
    # updates the 11.7M-row word-embedding matrix): 0.59 s against 0.90 s a step on a Zen 4 (two benchmarks each,
    # step_costs.jsonl), spent on steps: 2,160 (1,680 / 0.78, the least saving measured) in `evals_to_steps`' minutes,
    # its 5 evaluations every 540 steps; the tuning's encoder stays frozen whole (a model setting keyed by a phase)
    "freeze_first_layer": ("`evals_to_steps` with the word embeddings and the first of the 4 layers frozen in the "
                           "fine-tuning (a step about 0.66x the cost) and the minutes saved spent on steps: 2,160 "
                           "instead of 1,680, measured against `evals_to_steps`",
                           {"model": {"dropout": 0.0, EXPERIMENT: {"freeze_layers": 1}},
                            EXPERIMENT: {"max_steps": 2160, "eval_every_steps": 540}, "keep": "last"}),
    # the minutes `freeze_first_layer` left of the allowance (its -224 s; ~0.6 s a frozen step on a Zen 4) buy about
    # the rest of the two epochs: the fine-tuning's whole schedule (2,626 steps), the rate decaying to zero at its end
    "freeze_whole_schedule": ("`freeze_first_layer` run to the end of the fine-tuning's two epochs: 2,626 steps "
                              "instead of 2,160, measured against `freeze_first_layer`",
                              FREEZE_WHOLE_SCHEDULE),
    # a second frozen layer: 0.48 against 0.56 s a step in benchmarks.train_speed (60 steps, twice each in turn on a
    # Zen 4: 0.85x); the ~230 s that saves over 2,626 steps and the 239 s `freeze_whole_schedule` left of the
    # allowance buy about 800 steps, into a third epoch (the schedule decays to zero at max_steps): 3,300 with a
    # margin for the machine's day-to-day speed (the two seeds' fine-tunings differed by 6 %); dev every 660 steps
    "freeze_two_layers": ("`freeze_whole_schedule` with the first two of the 4 layers frozen (a step about 0.85x "
                          "the cost) and the minutes saved and left spent on a third epoch's start: 3,300 steps "
                          "instead of 2,626, measured against `freeze_whole_schedule`",
                          {"model": {"dropout": 0.0, EXPERIMENT: {"freeze_layers": 2}},
                           EXPERIMENT: {"max_steps": 3300, "epochs": 3, "eval_every_steps": 660}, "keep": "last"}),
    # the random window boundaries again, on today's default (on the 1,000-step baseline with dropout: +0.5 / -0.1):
    # without dropout and over 2.6x the steps the model sees each window's text more often, the case for
    # boundaries that move (Shi et al. 2021); no extra compute, so its cost is `freeze_whole_schedule`'s
    "jitter_default": ("`freeze_whole_schedule` with every window's start jittered by up to 25 tokens, measured "
                       "against `freeze_whole_schedule`",
                       {**FREEZE_WHOLE_SCHEDULE, "window_jitter": 25}),
    # the ASR-style noise again, on today's default, at the paper's rates (fixed before any test figure): on the
    # 1,000-step baseline (under one epoch, with dropout) it cost 1.7 dev F1, perhaps because the model then saw
    # less clean text; the default now reads the training text twice over, without dropout
    "augment_default": ("`freeze_whole_schedule` with ASR-style noise (rate 0.15, substitute / delete / insert "
                        "0.4 / 0.4 / 0.2), measured against `freeze_whole_schedule`",
                        {**FREEZE_WHOLE_SCHEDULE, "augment_rate": 0.15}),
    # no training: the combination of overlapping windows again, on today's default (on the 1,000-step baseline's
    # models it lowered dev by 0.1 / 0.2); the same windows as `punctuate`'s, so the same decoding work
    "combine_decode_default": ("`freeze_whole_schedule`'s model decoded with logits summed (stride 50), no "
                               "retraining, measured against `freeze_whole_schedule`", {"decode_combine": "sum"}),
    # the same steps over twice the text, none of it read twice: the prepare stage's seeded draw of talks run on to
    # 4.2M training tokens (the default 2.1M set and the 1,009 talks drawn after it; the same exclusions), one epoch
    # (2,625 steps) instead of two of the 2.1M set; the head's tuning reads the default set, as the trio's tunings
    # do, whose timing cues are simulated on it (:data:`TRAIN_TOKENS`)
    "fresh_data": ("`freeze_whole_schedule` over one epoch of 4.2M training tokens (the same draw of talks run on "
                   "past the 2.1M set) instead of two epochs of 2.1M: the same steps, no window read twice, measured "
                   "against `freeze_whole_schedule`",
                   {**FREEZE_WHOLE_SCHEDULE, EXPERIMENT: {**FREEZE_WHOLE_SCHEDULE[EXPERIMENT], "epochs": 1}}),
    # the rest of the pipeline's allowance spent on new text: 300 s by the rule less `fresh_data`'s +56 s and its
    # draw stage's 41 s leave ~200 s, ~340 steps at its 0.59 s a step; 300 more steps (a margin for the machine's
    # day-to-day speed) of a draw run on to 4.68M tokens (of about 4.8M the talks hold), so every step reads new text
    "fresh_data_allowance": ("`fresh_data` with the rest of the pipeline's allowance spent on new text: 2,925 "
                             "steps over one epoch of a 4.68M-token draw instead of 2,625 over 4.2M, measured "
                             "against `fresh_data`",
                             {**FREEZE_WHOLE_SCHEDULE, EXPERIMENT: {**FREEZE_WHOLE_SCHEDULE[EXPERIMENT],
                                                                    "max_steps": 2925, "epochs": 1}}),
    # no training: more context for every word at the same decoding work. Each word takes its label from the window
    # it is most central in, so with windows of 100 every 50 it sees at least 25 words on each side; windows of 150
    # every 75 give it 37, still two windows per word (the encoder's cost per word grows only by attention's share,
    # a few %; the rows of 150 words stay within max_subwords or are cut by split_long_rows as any long row)
    "wide_decode_default": ("`fresh_data_allowance`'s model decoded with windows of 150 words every 75 (two per "
                            "word, as now, each word at least 37 words from a window's edge instead of 25), no "
                            "retraining, measured against `fresh_data_allowance`",
                            {"decode_window": 150, "decode_stride": 75}),
    # no training: the head's second phase again, on today's default (with dropout it raised Ref / ASR; without, on
    # the 1,600-step default, dropping it lowered dev by 0.1 / 0.2: `nodropout1600_first_phase`). It retrains the
    # head 400 steps at lr 3e-3 on the 2.1M set, the text the fine-tuning has now already read, after the fine-tuning
    # annealed to zero over new text. (The pipeline's compare table had already reported the seed-1 first phase's
    # Ref and ASR, the model `minilm` of the results table, before this was measured: dev alone decides it.)
    "first_phase_default": ("`fresh_data_allowance`'s first phase alone as the text model (its fine-tuned "
                            "`minilm`, before the head's second phase), scored as it is: no training, measured "
                            "against `fresh_data_allowance`", {}),
    # the words arm's tuning (tune@minilm_words, 140 s on 2 cores, and its evaluation) is no longer `punctuate`'s
    # text model once `first_phase_default` is kept: dropped from the pipeline, its time (and the few seconds the
    # allowance had left) buys ~240 more fine-tuning steps at 0.57 s a step, 3,150 with a margin; the draw runs on
    # to every talk it may take (about 4.85M tokens, one pass in ~3,030 steps), the last ~120 steps start a second
    # pass
    "steps_for_words_arm": ("`first_phase_default` with the words arm's head tuning dropped from the pipeline and "
                            "its minutes spent on the fine-tuning: 3,150 steps instead of 2,925, over every talk the "
                            "draw may take (one pass, then a second's start); the fine-tuned model is the text "
                            "model, measured against `first_phase_default`",
                            {**FREEZE_WHOLE_SCHEDULE, EXPERIMENT: {**FREEZE_WHOLE_SCHEDULE[EXPERIMENT],
                                                                   "max_steps": 3150, "epochs": 2}}),
    # not a lever: what the Done-when would cost in training compute (a setting keyed by a phase is that phase's)
    "steps2x": ("twice the fine-tuning steps (2,000; the 400 of the head tuning unchanged): training compute, "
                "a budget point, never a lever", {EXPERIMENT: {"max_steps": 2000}}),
    "steps3x": ("the fine-tuning's whole schedule, two epochs (2,626 steps: its end comes before max_steps 3,000), "
                "2.6x: a budget point, never a lever", {EXPERIMENT: {"max_steps": 3000}}),
}
#: the run a lever is measured against where not the baseline (its F1, seed by seed): the default it would replace
REFERENCE: dict[str, str] = {"nodropout1600": "steps1350", "nodropout1600_first_phase": "nodropout1600",
                             "keep_last": "nodropout1600", "evals_to_steps": "keep_last",
                             "freeze_first_layer": "evals_to_steps", "freeze_whole_schedule": "freeze_first_layer",
                             "freeze_two_layers": "freeze_whole_schedule",
                             "combine_decode_default": "freeze_whole_schedule",
                             "jitter_default": "freeze_whole_schedule",
                             "augment_default": "freeze_whole_schedule",
                             "fresh_data": "freeze_whole_schedule", "fresh_data_allowance": "fresh_data",
                             "wide_decode_default": "fresh_data_allowance",
                             "first_phase_default": "fresh_data_allowance",
                             "steps_for_words_arm": "first_phase_default"}
#: runs that decode another run's model of the same seed again instead of training (run -> that run; their levers
#: change only the model directory's recorded decoding; model selection on dev stays that run's)
DECODE_ONLY: dict[str, str] = {"combine_decode": "baseline", "combine_decode_stride25": "baseline",
                               "combine_decode_default": "freeze_whole_schedule",
                               "wide_decode_default": "fresh_data_allowance"}
#: runs that score the first-phase model (the fine-tuned ``minilm`` its ``minilm_words`` started from) of another
#: run of the same seed instead of training: that run's tuned model without its second phase
FIRST_PHASE_OF: dict[str, str] = {"nodropout1600_first_phase": "nodropout1600",
                                   "first_phase_default": "fresh_data_allowance"}
#: runs whose first phase differs from another run's of the same seed only in which weights it keeps
#: (``training.config.SELECTION_FIELDS``, outside the checkpoint fingerprint): that run's finished checkpoint is
#: copied into this run's work folder, and the trainer keeps its weights this run's way without training again
RESUMES: dict[str, str] = {"keep_last": "nodropout1600"}
#: runs trained on another draw of training text: run -> its training tokens, the prepare stage's seeded draw of
#: talks (params.yaml's ``data``, exclusions and all) run on to that many (the default set is its first 2.1M), built
#: once under ``--work`` (:func:`drawn_features`) and read by the fine-tuning (the head's tuning reads
#: ``--tuning-features``, as in the pipeline); dev, Ref and ASR are the same words
TRAIN_TOKENS: dict[str, int] = {"fresh_data": 4_200_000, "fresh_data_allowance": 4_680_000,
                                 "steps_for_words_arm": 5_100_000}  # more than the talks hold: every one of them
#: runs whose text model is the fine-tuning itself: the head's tuning (``minilm_words``) is not trained, and the
#: fine-tuned model is scored (the text model of ``first_phase_default``, kept, with the words arm dropped)
FIRST_PHASE_ONLY: frozenset[str] = frozenset({"steps_for_words_arm"})
DEFAULT_RUNS = ("baseline", "augment", "jitter", "combine", "all")
CLASSES = ("COMMA", "PERIOD", "QUESTION")


def run_configs(params: dict, run: str, train_sets: dict, model_sets: dict) -> dict[str, tuple[dict, dict]]:
    """``{"minilm": (model, train), "minilm_words": (model, train)}`` of ``run``: params' settings, the run's
    levers and ``train_sets`` over both phases' ``train`` (a setting keyed by a phase's name over that phase only),
    the run's ``model`` settings and then ``model_sets`` over both models."""
    levers = {**STUDY_TRAIN, **RUNS[run][1], **train_sets}
    own = {phase: {**STUDY_BASELINE.get(phase, {}), **levers.pop(phase, {})}  # one phase's settings
           for phase in (EXPERIMENT, TUNING)}
    model_sets = {**STUDY_MODEL, **levers.pop("model", {}), **model_sets}  # the study's, the run's, the call's
    model, train = experiment_config(params, EXPERIMENT)
    _, tuned_model, tuned_train = tuning_config(params, TUNING_SETTINGS_OF)
    configs = {}
    for phase, (phase_model, phase_train) in ((EXPERIMENT, (model, train)), (TUNING, (tuned_model, tuned_train))):
        configs[phase] = (merged(phase_model, phase_settings(model_sets, phase), f"--model-set ({phase})", "model"),
                          merged(phase_train, {**levers, **own[phase]}, f"run {run} ({phase})", "train"))
    return configs


def phase_settings(settings: dict, phase: str) -> dict:
    """``settings`` as ``phase`` takes them: those over both phases, then its own (keyed by its name) over them."""
    both = {key: value for key, value in settings.items() if key not in (EXPERIMENT, TUNING)}
    return {**both, **settings.get(phase, {})}


def settings_text(levers: dict) -> str:
    """``key=value, ...`` of a run's settings, a phase's own as ``phase.key=value`` (``model.phase.key=value``)."""
    def pairs(settings: dict, prefix: str = "") -> list[tuple[str, Any]]:
        flat = [(prefix + key, value) for key, value in settings.items() if not isinstance(value, dict)]
        return flat + [pair for key, value in settings.items() if isinstance(value, dict)
                       for pair in pairs(value, f"{prefix}{key}.")]
    return ", ".join(f"{key}={value}" for key, value in pairs(levers)) or "–"


def decoded_again(source_dir: Path, run: str, work: Path) -> Path:
    """A copy of the model directory ``source_dir`` (:data:`DECODE_ONLY`'s run's) whose config records ``run``'s
    decoding instead (files linked)."""
    target = work / TUNING / "model"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for path in source_dir.iterdir():
        if path.name != "config.json":
            (target / path.name).symlink_to(path.resolve(), target_is_directory=path.is_dir())
    config = json.loads((source_dir / "config.json").read_text(encoding="utf-8"))
    config["train"] = {**config["train"], **RUNS[run][1]}
    for key in ("window", "stride"):  # what the trainer records as the model's windows
        if f"decode_{key}" in RUNS[run][1]:
            config[key] = RUNS[run][1][f"decode_{key}"]
    (target / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return target


def score(params: dict, model_dir: Path, work: Path, args: argparse.Namespace, splits: list[str]) -> dict[str, Any]:
    """The model's scores on ``splits``: dev on the whole of its cached tokens, as model selection decodes it
    (the dev2012 text holds tokens such as ``--`` that ``punctuate`` reads as punctuation, so it is not a text to
    punctuate); Ref and ASR through ``punctuate``'s decoding, as the evaluate stage scores them."""
    from evaluation.benchmark import evaluate_model

    scores = {}
    if "dev" in splits:
        scores["dev"] = score_dev(model_dir, args.tuning_features, int(params["evaluate"]["batch_size"]))
    tests = [split for split in splits if split != "dev"]
    if tests:
        done = evaluate_model(model_dir, args.prepared, work / "predictions", splits=tests,
                              batch_size=int(params["evaluate"]["batch_size"]), device=args.device)
        scores.update({split: done[split] for split in tests})
    return scores


def score_dev(model_dir: Path, features: Path, batch_size: int) -> dict[str, Any]:
    """The whole dev split of ``features`` decoded by the model with its recorded windows and combining rule."""
    import torch

    from embeddings.store import load_split, load_split_words
    from inference.model_dir import load_trained_model
    from training.dev_eval import TokenSlice, evaluate_on_tokens

    model, config = load_trained_model(model_dir, "cpu", traced=False)  # the dev loss needs the full encoder
    train = config.get("train") or {}
    dev = TokenSlice(load_split(features, "dev"), None,
                     load_split_words(features, "dev") if getattr(model, "reads_words", False) else None)
    result = evaluate_on_tokens(model, dev, window=int(config["window"]), stride=int(train.get("decode_stride")
                                or config["stride"]), label_smoothing=0.0, device=torch.device("cpu"),
                                batch_size=batch_size, combine=train.get("decode_combine", "centre"))
    return result["scores"]


def pipeline_phases(model_dir: Path, configs: dict[str, tuple[dict, dict]]) -> dict[str, Any] | None:
    """Both phases' settings and metrics of the pipeline's tuned model ``model_dir`` (and the ``minilm`` model it
    started from), or None unless both were trained with ``configs``' train and model settings."""
    from training.config import TrainConfig

    recorded = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    source = Path((recorded.get("initialised_from") or {}).get("path", "")) / "config.json"  # its minilm
    if not source.is_file():
        return None
    started = json.loads(source.read_text(encoding="utf-8"))
    for phase, config in ((TUNING, recorded), (EXPERIMENT, started)):
        if TrainConfig.from_mapping(config["train"]) != TrainConfig.from_mapping(configs[phase][1]):
            return None
        if any(config["model"].get(key) != value for key, value in configs[phase][0].items()):
            return None
    return {phase: {"train": config["train"], "metrics": config.get("metrics", {}), "timings": {}}
            for phase, config in ((EXPERIMENT, started), (TUNING, recorded))}


def this_machine() -> str:
    """What a run's wall times depend on, as ``benchmarks.machine.this_machine`` names it for the step costs (a script
    may not import ``benchmarks``: tests/test_layering.py; the library's place for it, ``experiments``, is a
    dependency of every training stage)."""
    flags = cpu_flags() or set()
    return f"{cpu_model()}, {os.cpu_count()} cores, {'AVX-512' if 'avx512f' in flags else 'no AVX-512'}"


def finished_run(out: Path, run: str, seed: int, needed_by: str) -> dict[str, Any]:
    """The result of ``run`` with ``seed`` in ``out/runs``, which ``needed_by`` scores a model of; an error naming
    the file and the run to do first where it is missing."""
    path = out / "runs" / f"{run}_seed{seed}.json"
    if not path.is_file():
        raise SystemExit(f"error: {needed_by} (seed {seed}) scores {run}'s model, and {path} does not exist: "
                         f"run --runs {run} --seeds {seed} first")
    return json.loads(path.read_text(encoding="utf-8"))


def first_phase_model(tuned_dir: Path) -> Path:
    """The ``minilm`` model directory the tuned model ``tuned_dir`` started from (its recorded ``initialised_from``),
    checked to hold the weights the tuning started from."""
    from training.warm_start import weights_sha256

    recorded = json.loads((tuned_dir / "config.json").read_text(encoding="utf-8")).get("initialised_from") or {}
    source = Path(recorded.get("path", ""))
    if not recorded.get("path") or not (source / "config.json").is_file():
        raise SystemExit(f"error: {tuned_dir} records no first-phase model it started from that still exists "
                         f"({recorded.get('path') or 'none recorded'})")
    if weights_sha256(source) != recorded.get("weights_sha256"):
        raise SystemExit(f"error: {source} no longer holds the weights {tuned_dir} started from: it was trained "
                         "again since")
    return source


def resume_first_phase(params: dict, run: str, seed: int, args: argparse.Namespace) -> None:
    """Copy the finished first phase of :data:`RESUMES`' run of ``seed`` into ``run``'s work folder (once): an error
    where the trainer would not resume it (its fingerprint differs: the settings differ in more than which weights
    are kept), or it is not in ``--work``."""
    from training import training_fingerprint
    from training.config import SELECTION_FIELDS

    source = RESUMES[run]
    target = args.work / f"{run}_seed{seed}" / EXPERIMENT / "state"
    if target.exists():
        return
    ours, theirs = (training_fingerprint(*run_configs(params, name, {**dict(args.train_set), "seed": seed},
                                                      dict(args.model_set))[EXPERIMENT], args.features)
                    for name in (run, source))
    if ours != theirs:
        raise SystemExit(f"error: {run}'s first phase differs from {source}'s in more than "
                         f"{', '.join(SELECTION_FIELDS)}: it cannot resume {source}'s")
    state = args.work / f"{source}_seed{seed}" / EXPERIMENT / "state"
    if not (state / "checkpoint.pt").is_file():
        raise SystemExit(f"error: {run} (seed {seed}) keeps {source}'s finished first phase its own way, and "
                         f"{state / 'checkpoint.pt'} does not exist: run --runs {source} --seeds {seed} first")
    shutil.copytree(state, target, ignore=shutil.ignore_patterns("*.lock"))


def first_phase_of_source(phase: dict[str, Any], source: dict[str, Any], name: str) -> dict[str, Any]:
    """A :data:`RESUMES` run's first ``phase`` (its settings and metrics) with the timings of the training it kept
    its own way: ``source``'s (the result of run ``name``) first phase."""
    return {**phase, "timings": source["phases"][EXPERIMENT]["timings"], "resumed_from": name}


def drawn_features(params: dict, tokens: int, work: Path) -> Path:
    """The word features of the training text drawn as the prepare stage draws it (params' ``data``) but to
    ``tokens`` training tokens, with the embed stage's word source: ``work/data_<tokens>/features``
    (:func:`trainset.draws.draw_features`, as stage ``draw@NAME`` builds them)."""
    from trainset.draws import draw_features

    return draw_features(params["data"], params["embed"], tokens, work / f"data_{tokens}")


class RunPaused(Exception):
    """A run's training paused by ``--pause-after-s``: checkpointed, resumed by the same command."""


def train_and_score(params: dict, run: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Both phases of ``run`` with ``seed`` (resumable), then the tuned model scored on ``args.splits``.

    A decode-only run (:data:`DECODE_ONLY`) scores another run's model of ``seed`` decoded its way, with that run's
    settings, training time and machine under its own decoding. The run whose
    settings the pipeline trained ``--pipeline-model`` with (both phases, checked) is that model for the params' own
    seed: training it again here would give the same bytes on the CPU."""
    from training import train_model
    from training.model_output import HISTORY_FILE, dev_evaluations

    work = args.work / f"{run}_seed{seed}"
    if run in DECODE_ONLY or run in FIRST_PHASE_OF:  # another run's model: decoded its way, or its first phase
        source = finished_run(args.out, {**DECODE_ONLY, **FIRST_PHASE_OF}[run], seed, run)
        model_dir = (decoded_again(Path(source["model_dir"]), run, work) if run in DECODE_ONLY
                     else first_phase_model(Path(source["model_dir"])))
        # the source's settings (a decode-only run's decoding over them): its model and train settings are what the
        # model trained with (the baseline's: none), so the levers' rule times it as the source, on its machine
        machine = {"machine": source["machine"]} if source.get("machine") else {}
        return {"run": run, "seed": seed, "what": RUNS[run][0], "levers": {**source["levers"], **RUNS[run][1]},
                "model_dir": str(model_dir), "phases": source["phases"], **machine,
                "scores": score(params, model_dir, work, args, args.splits)}
    configs = run_configs(params, run, {**dict(args.train_set), "seed": seed}, dict(args.model_set))
    if args.pipeline_model and seed == int(experiment_config(params, EXPERIMENT)[1]["seed"]):
        phases = pipeline_phases(args.pipeline_model, configs)
        if phases is not None:
            return {"run": run, "seed": seed, "what": RUNS[run][0] + " (the pipeline's own model)",
                    "levers": RUNS[run][1], "model_dir": str(args.pipeline_model), "phases": phases,
                    "scores": score(params, args.pipeline_model, work, args, args.splits)}
        print(f"   {args.pipeline_model} was trained with other settings than {run}'s: training {run}", flush=True)
    source = None  # the run whose finished first phase this one keeps its own way: its result read before training
    if run in RESUMES:
        source = finished_run(args.out, RESUMES[run], seed, run)
        resume_first_phase(params, run, seed, args)
    window, stride = int(params["evaluate"]["window"]), int(params["evaluate"]["stride"])
    budget = Budget(pause_at=getattr(args, "pause_at", None))
    trained = {}
    drawn = drawn_features(params, TRAIN_TOKENS[run], args.work) if run in TRAIN_TOKENS else None
    phases = ((EXPERIMENT, drawn or args.features, None), (TUNING, args.tuning_features, work / EXPERIMENT / "model"))
    for phase, features, init_from in phases[:1] if run in FIRST_PHASE_ONLY else phases:
        model, train = configs[phase]
        result = train_model(features, work / phase / "model", work / phase / "state", model_config=model,
                             train_config=train, window=window, stride=stride, init_from=init_from,
                             budget=budget)
        if not result.metrics["completed"]:
            if budget.pause_at is not None:
                raise RunPaused(f"{run}, seed {seed}: {phase} paused at step {result.metrics['steps']} "
                                f"(--pause-after-s), checkpointed in {work / phase / 'state'}: the same command "
                                "resumes it")
            raise RuntimeError(f"{run} seed {seed}: {phase} did not complete")
        # the evaluations its time holds, as the trainer made them (every eval_every_steps, each epoch's end, the end)
        evaluations = dev_evaluations(work / phase / "model" / HISTORY_FILE)
        trained[phase] = {"train": train, "metrics": result.metrics,
                          "timings": {**result.timings, "dev_evaluations": evaluations}}
    if source is not None:  # its first phase's time is the source's training, not the seconds it took to keep it
        trained[EXPERIMENT] = first_phase_of_source(trained[EXPERIMENT], source, RESUMES[run])
    model_dir = work / (EXPERIMENT if run in FIRST_PHASE_ONLY else TUNING) / "model"
    return {"run": run, "seed": seed, "what": RUNS[run][0], "levers": RUNS[run][1], "model_dir": str(model_dir),
            "phases": trained, "machine": this_machine(), "scores": score(params, model_dir, work, args, args.splits)}


def overall_f1(result: dict, split: str) -> float:
    """A run's micro-averaged F1 on ``split``, in %."""
    return 100 * result["scores"][split]["OVERALL"]["f1"]


def table(results: list[dict], splits: list[str]) -> str:
    """The markdown table: one row per run and seed, F1 in %, and the change against that seed's baseline."""
    baseline = {r["seed"]: r for r in results if r["run"] == "baseline"}
    header = ["run", "seed", "levers"]
    for split in splits:
        header += [f"{split} F1", f"{split} SER", *(f"{split} {c}" for c in CLASSES), f"{split} Δ F1"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for result in results:
        levers = settings_text(result["levers"])
        row = [result["run"], str(result["seed"]), levers]
        for split in splits:
            scores = result["scores"].get(split)
            if scores is None:  # a test split is scored only for the setting chosen on dev (and its baseline)
                row += ["–"] * (3 + len(CLASSES))
                continue
            f1 = overall_f1(result, split)
            base = baseline.get(result["seed"])
            delta = f"{f1 - overall_f1(base, split):+.1f}" if base and split in base["scores"] else "–"
            row += [f"{f1:.1f}", f"{100 * scores['SER']:.1f}", *(f"{100 * scores[c]['f1']:.1f}" for c in CLASSES),
                    delta]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


#: the issue's targets through ``punctuate`` (overall F1, %), drawn on the figure
TARGETS = {"ref": 67.0, "asr": 61.0}


def plot(results: list[dict], splits: list[str], path: Path) -> None:
    """One panel per split, over the runs scored on it: each run's F1 per seed (a point each, its mean a bar), the
    baseline's seeds as dashed lines, so a lever's change is read against the spread of seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(split, list(dict.fromkeys(r["run"] for r in results if split in r["scores"]))) for split in splits]
    panels = [(split, runs) for split, runs in panels if runs]
    rows = max(2, *(len(runs) for _, runs in panels))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 0.45 * rows + 1.6), squeeze=False)
    for ax, (split, runs) in zip(axes[0], panels):
        scored = [r for r in results if split in r["scores"]]
        for row, run in enumerate(runs):
            f1 = [overall_f1(r, split) for r in scored if r["run"] == run]
            ax.barh(row, sum(f1) / len(f1), height=0.6, color="C0" if run == "baseline" else "C1", alpha=0.35)
            ax.scatter(f1, [row] * len(f1), color="k", s=14, zorder=3)
        every = [overall_f1(r, split) for r in scored]
        for r in scored:
            if r["run"] == "baseline":
                ax.axvline(overall_f1(r, split), color="C0", ls="--", lw=1)
        target = TARGETS.get(split)
        if target is not None:  # the Done-when, through `punctuate`
            ax.axvline(target, color="C3", ls=":", lw=1.5)
            ax.text(target, -0.45, f" target {target:g}", color="C3", va="top", fontsize=8)
            every.append(target)
        ax.set_xlim(min(every) - 1.5, max(every) + 1.0)
        ax.set_yticks(range(len(runs)), runs)
        ax.set_ylim(max(len(runs), 3) - 0.5, -0.5)  # a panel of one run keeps a bar of the same height
        ax.set(xlabel=f"{split} F1 (%), micro-averaged", title=f"{split}: each point a seed, bar the mean")
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


#: runs whose decoding does more work than the baseline's (``punctuate`` must stay within 20 % of its speed)
DECODING_COST = {"combine_stride25": 2.0, "combine_decode_stride25": 2.0}
#: the most decoding work a kept lever may cost, as a multiple of the baseline's
MAX_DECODING_COST = 1.2
#: runs that train longer than the baseline: budget points, which no verdict keeps (the issue's CPU budget)
TRAINING_COST = {"steps2x": 2.0, "steps3x": 2.6}
#: the most training time a kept lever may add, in seconds over the baseline's (the issue: the default pipeline
#: grows by at most 5 minutes)
MAX_EXTRA_TRAINING_S = 300.0


def training_wall_s(result: dict) -> float | None:
    """Both phases' wall seconds of a trained run (training, its dev evaluations and checkpoints), None where a
    phase has no timings (the pipeline's own model, a decode-only run)."""
    walls = [phase.get("timings", {}).get("wall_seconds") for phase in result["phases"].values()]
    return None if not walls or None in walls else float(sum(walls))


#: the machine of a run whose result does not name one (the runs before machines were recorded, all on the
#: study's machine: their wall times are compared with each other only)
UNRECORDED_MACHINE = "unrecorded"


def machine_of(result: dict) -> str:
    """The machine ``result`` was trained on (:func:`this_machine`), or :data:`UNRECORDED_MACHINE`."""
    return result.get("machine") or UNRECORDED_MACHINE


def mean_wall_s(results: list[dict], run: str, machine: str | None = None) -> float | None:
    """The mean of :func:`training_wall_s` over ``run``'s seeds that have one (trained on ``machine``, if given)."""
    walls = [wall for r in results if r["run"] == run and (machine is None or machine_of(r) == machine)
             and (wall := training_wall_s(r)) is not None]
    return sum(walls) / len(walls) if walls else None


#: benchmark lines (``python -m benchmarks.train_speed --experiments minilm --steps 60 [--model-set KEY=VALUE]``,
#: appended one JSON line each) that measure a fine-tuning step's cost under a run's model settings against the
#: reference's, on one machine: a run with a :data:`REFERENCE` that no baseline ran beside is timed from them
STEP_COSTS_FILE = "step_costs.jsonl"


def read_step_costs(path: Path) -> list[dict]:
    """The benchmark lines of ``path`` (none where it does not exist); a line that is not JSON is an error naming it."""
    if not path.is_file():
        return []
    lines = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if text.strip():
            try:
                lines.append(json.loads(text))
            except ValueError as error:
                raise SystemExit(f"error: {path}, line {number}: not a JSON line of benchmarks.train_speed ({error})")
    return lines


def seconds_per_step(step_costs: list[dict], model: dict, machine: str, unlike: dict | None = None) -> float | None:
    """The mean training seconds of a fine-tuning (``minilm``) step measured on ``machine`` with no train setting and
    the model settings ``model`` (each line's resolved ``model`` holds them; a line without one is not read: its
    ``model_set`` alone says nothing once params' defaults change), its dev evaluations and checkpoints apart.
    ``unlike``: settings the line must not have (the other side's own, which ``model`` leaves at params' value)."""
    costs = [line["train_s"] / line["steps"] for line in step_costs
             if line.get("experiment") == EXPERIMENT and line.get("machine") == machine and line.get("steps")
             and isinstance(line.get("model"), dict) and not line.get("train_set")
             and all(line["model"].get(key) == value for key, value in model.items())
             and not any(line["model"].get(key) == value for key, value in (unlike or {}).items())]
    return sum(costs) / len(costs) if costs else None


def step_cost_ratio(step_costs: list[dict], model: dict, reference_model: dict) -> tuple[float, str] | None:
    """``(ratio, machine)``: a fine-tuning step with the model settings ``model`` over one with
    ``reference_model``, both measured on one machine (the first in ``step_costs`` that measured both); None where no
    machine did. A setting one side has and the other leaves at params' value tells their lines apart (a line with
    ``freeze_layers: 1`` measures a run with it, not a reference without it)."""
    own_only = {key: value for key, value in model.items() if key not in reference_model}
    reference_only = {key: value for key, value in reference_model.items() if key not in model}
    for machine in dict.fromkeys(line["machine"] for line in step_costs if line.get("machine")):
        own, reference = (seconds_per_step(step_costs, model, machine, unlike=reference_only),
                          seconds_per_step(step_costs, reference_model, machine, unlike=own_only))
        if own is not None and reference:
            return own / reference, machine
    return None


def study_model(results: list[dict], run: str) -> dict[str, Any]:
    """The model settings ``run`` was trained with over params': the study's, then its own as its result records
    them (:func:`run_configs`; a phase's own keyed by its name)."""
    recorded = next((r for r in results if r["run"] == run), {}).get("levers", {})
    return {**STUDY_MODEL, **recorded.get("model", {})}


def fine_tuning_model(results: list[dict], run: str) -> dict[str, Any]:
    """:func:`study_model` as the fine-tuning (the first phase, whose steps the step costs measure) takes it."""
    return phase_settings(study_model(results, run), EXPERIMENT)


def estimated_extra_s(results: list[dict], run: str, reference: str, ratio: float,
                      step_costs: list[dict] = ()) -> float | None:
    """``run``'s training seconds over the baseline's, on the machine where ``reference`` was trained and ``run``
    was not: the reference's own extra (:func:`extra_training`: beside a baseline, else through its reference), plus
    its fine-tuning again at ``run``'s steps (its training time at ``ratio`` the cost a step, its dev evaluations
    and checkpoints in proportion to the steps) less what that phase took. The head tuning is counted at the
    reference's cost. None where the reference has no timed seed or no known extra."""
    timed = [r for r in results if r["run"] == reference and training_wall_s(r) is not None]
    if not timed:
        return None
    machine = machine_of(timed[0])
    reference_extra = extra_training(results, reference, step_costs)[0]
    if reference_extra is None:
        return None
    steps = next(r for r in results if r["run"] == run)["phases"][EXPERIMENT]["metrics"]["steps"]
    changes = []
    for result in (r for r in timed if machine_of(r) == machine):
        timings = result["phases"][EXPERIMENT]["timings"]
        scale = steps / result["phases"][EXPERIMENT]["metrics"]["steps"]
        train, wall = timings["train_seconds"], timings["wall_seconds"]
        changes.append(train * scale * ratio + (wall - train) * scale - wall)
    return reference_extra + sum(changes) / len(changes)


def recosted_wall_s(phase: dict[str, Any], steps: int, evals: int) -> float:
    """``phase`` (a run's phase: its metrics and timings, with the dev evaluations they hold) at ``steps`` steps and
    ``evals`` dev evaluations instead of its own, at its own measured rates: a step at its training seconds a step,
    an evaluation (and the checkpoint written with it) at its seconds an evaluation; the rest (set-up, the model
    directory) as it was."""
    timings, own_steps = phase["timings"], phase["metrics"]["steps"]
    train, evaluating = timings["train_seconds"], timings["eval_seconds"] + timings.get("checkpoint_seconds", 0.0)
    rest = timings["wall_seconds"] - train - evaluating
    return train / own_steps * steps + evaluating / timings["dev_evaluations"] * evals + rest


def work_beyond_s(results: list[dict], run: str, reference: str) -> float | None:
    """What ``run`` took beyond the work of ``reference``, both at ``run``'s own measured rates: the mean over
    ``run``'s seeds of its wall seconds less its phases again at the reference's steps and dev evaluations
    (:func:`recosted_wall_s`). For a run with the reference's model settings, whose work differs only in how many
    steps and evaluations it does: its step and evaluation cost that of the reference's, so a machine that runs
    slower or faster on the day (one label, another speed) does not enter the difference. A phase the reference
    trained and ``run`` does not (:data:`FIRST_PHASE_ONLY`) saves the reference's wall seconds for it. None where
    the model settings differ or a phase lacks the timings."""
    if study_model(results, run) != study_model(results, reference):
        return None
    references = {r["seed"]: r for r in results if r["run"] == reference}
    beyond = []
    for result in (r for r in results if r["run"] == run):
        other = references.get(result["seed"]) or next(iter(references.values()), None)
        try:
            beyond.append(sum(phase["timings"]["wall_seconds"] - recosted_wall_s(
                phase, other["phases"][name]["metrics"]["steps"], other["phases"][name]["timings"]["dev_evaluations"])
                for name, phase in result["phases"].items())
                - sum(phase["timings"]["wall_seconds"] for name, phase in other["phases"].items()
                      if name not in result["phases"]))
        except (KeyError, TypeError, ZeroDivisionError):  # a phase without timings or their evaluations: not re-costed
            return None
    return sum(beyond) / len(beyond) if beyond else None


def extra_training(results: list[dict], run: str, step_costs: list[dict] = ()
                   ) -> tuple[float | None, bool, tuple[float, str] | None, float | None]:
    """``(extra, uncompared, estimated, beside)``: ``run``'s training seconds over the baseline's (None: unknown),
    whether it was trained where no baseline ran and could not be timed, the ``(ratio, machine)`` of the step costs
    an estimate came from, and the seconds it took beyond its :data:`REFERENCE` trained on the same machine.

    Wall times compare only on one machine: the run's against the baseline's seeds trained where it was; else its
    reference's extra (this function's, again) plus what the run took beyond the reference on their machine (for a
    run with the reference's model settings, its work beyond the reference's at its own measured rates,
    :func:`work_beyond_s`: one machine label can run at another speed on another day); else,
    for a reference trained elsewhere, an estimate from the step costs (:func:`estimated_extra_s`)."""
    if run in FIRST_PHASE_OF:  # trains nothing: its time is the run's whose first phase it is
        return extra_training(results, FIRST_PHASE_OF[run], step_costs)
    machine = machine_of(next(r for r in results if r["run"] == run))
    wall, base_wall = mean_wall_s(results, run, machine), mean_wall_s(results, "baseline", machine)
    if wall is None:  # untimed (the pipeline's own model, a decode-only run)
        return None, False, None, None
    if base_wall is not None:
        return wall - base_wall, False, None, None
    if run not in REFERENCE:
        return None, True, None, None
    reference = REFERENCE[run]
    reference_wall = mean_wall_s(results, reference, machine)
    if reference_wall is not None:  # beside the reference: its extra, and this run's difference from it
        extra, uncompared, estimated, _ = extra_training(results, reference, step_costs)
        if extra is not None:
            beyond = work_beyond_s(results, run, reference)
            beside = wall - reference_wall if beyond is None else beyond
            return extra + beside, uncompared, estimated, beside
    measured = step_cost_ratio(step_costs, fine_tuning_model(results, run), fine_tuning_model(results, reference))
    if measured is not None:
        extra = estimated_extra_s(results, run, reference, measured[0], step_costs)
        if extra is not None:
            return extra, False, measured, None
    return None, True, None, None


def verdicts(results: list[dict], split: str = "dev", step_costs: list[dict] = ()) -> list[str]:
    """What each lever's runs say on ``split``: its change against the run it is measured against (the baseline, or
    its :data:`REFERENCE`) of the same seed, per seed. A lever is kept only when it raised F1 on every seed of at
    least two, decodes within 1.2x the baseline's work and adds at most :data:`MAX_EXTRA_TRAINING_S` of training
    to the baseline's (the pipeline's allowance, whatever the reference). A run with a reference, trained where no
    baseline ran, is timed from ``step_costs`` (:data:`STEP_COSTS_FILE`, :func:`estimated_extra_s`) when they
    measured its step against the reference's on one machine."""
    def f1_per_seed(run: str) -> dict[int, float]:
        return {r["seed"]: overall_f1(r, split) for r in results if r["run"] == run and split in r["scores"]}

    baseline = f1_per_seed("baseline")
    baseline_wall = mean_wall_s(results, "baseline", UNRECORDED_MACHINE)  # the study's machine, in the header
    lines = []
    for run in dict.fromkeys(r["run"] for r in results if r["run"] != "baseline"):
        against = f1_per_seed(REFERENCE.get(run, "baseline"))
        changes = {r["seed"]: overall_f1(r, split) - against[r["seed"]] for r in results
                   if r["run"] == run and r["seed"] in against and split in r["scores"]}
        if not changes:
            continue
        deltas = list(changes.values())
        mean = sum(deltas) / len(deltas)
        said = ", ".join(f"{d:+.1f}" for d in deltas)
        machine = machine_of(next(r for r in results if r["run"] == run))
        extra, uncompared, estimated, beside = extra_training(results, run, step_costs)
        if TRAINING_COST.get(run, 1.0) > 1.0:
            why = f"not a lever: {TRAINING_COST[run]:g}x the fine-tuning steps, outside the CPU budget"
        elif extra is not None and extra > MAX_EXTRA_TRAINING_S:
            why = f"not kept: {extra:+.0f} s of training, over the pipeline's {MAX_EXTRA_TRAINING_S:.0f} s allowance"
        elif DECODING_COST.get(run, 1.0) > MAX_DECODING_COST:
            why = f"not kept: {DECODING_COST[run]:g}x the decoding work"
        elif all(d <= 0 for d in deltas):
            why = "not kept: did not raise F1" + (" on any seed" if len(deltas) > 1 else "")
        elif any(d <= 0 for d in deltas):
            why = "not kept: did not raise F1 on every seed"
        elif len(deltas) < 2:
            why = "not kept yet: one seed"
        elif uncompared:
            why = "not kept yet: no baseline trained on its machine to compare its training time with"
        else:
            why = "**kept**"
        cost = f"; training {extra:+.0f} s" if extra is not None and abs(extra) >= 30 else ""
        if beside is not None:  # the reference's extra (measured or estimated) and the difference from it
            how = (f"for its work beyond `{REFERENCE[run]}`'s at its own rates"
                   if work_beyond_s(results, run, REFERENCE[run]) is not None else "measured beside it")
            cost = (f"; training {extra:+.0f} s: `{REFERENCE[run]}`'s {extra - beside:+.0f} s"
                    f"{' (estimated)' if estimated is not None else ''} and {beside:+.0f} s {how} on {machine}")
        elif estimated is not None:
            cost = (f"; training {extra:+.0f} s, estimated: `{REFERENCE[run]}`'s, its fine-tuning at this run's "
                    f"steps and {estimated[0]:.2f}x its step cost, measured on {estimated[1]} (`{STEP_COSTS_FILE}`)")
        if uncompared:
            cost = f"; trained on {machine}, where no baseline ran: its time not compared"
        if run in FIRST_PHASE_OF:
            cost = f"; no training of its own: `{FIRST_PHASE_OF[run]}`'s first phase"
        versus = f" against `{REFERENCE[run]}`" if run in REFERENCE else ""
        lines.append(f"- `{run}`: {split} Δ F1{versus} {said} (seed{'s' if len(deltas) > 1 else ''} "
                     f"{', '.join(map(str, changes))}; "
                     f"mean {mean:+.2f}{cost}): {why}")
    spread = sorted(baseline.values())
    head = (f"The baseline itself over {len(spread)} seeds: {' / '.join(f'{f:.1f}' for f in spread)} ({split} F1). "
            if len(spread) > 1 else "")
    walls = "" if not baseline_wall else (
        f" (training: both phases' wall time on 2 cores against the baseline's mean on the same machine, "
        f"{baseline_wall / 60:.1f} min on the study's, where it differs by 30 s or more)")
    return [head + "A lever is kept when it raised dev F1 on every seed of at least two, decodes within "
            f"{MAX_DECODING_COST:g}x the baseline's work (`punctuate`'s speed) and adds at most "
            f"{MAX_EXTRA_TRAINING_S / 60:g} minutes of training (the pipeline's allowance){walls}:", "", *lines]


def split_tables(results: list[dict], splits: list[str]) -> list[tuple[list[dict], list[str]]]:
    """The rows and columns of each table: dev for every run, then the test splits for the runs scored on them
    (the setting chosen on dev and its baseline)."""
    tests = [split for split in splits if split != "dev"]
    tables = [(results, ["dev"])] if "dev" in splits else []
    scored = [r for r in results if all(split in r["scores"] for split in tests)]
    return tables + ([(scored, tests)] if tests and scored else [])


def report(results: list[dict], splits: list[str], args: argparse.Namespace, figure: str | None = None,
           step_costs: list[dict] = ()) -> str:
    steps = {phase: sorted({r["phases"][phase]["metrics"]["steps"] for r in results if phase in r["phases"]})
             for phase in (EXPERIMENT, TUNING)}
    untuned = list(dict.fromkeys(r["run"] for r in results if TUNING not in r["phases"]))  # FIRST_PHASE_ONLY's
    tuning = ", ".join(([f"{'/'.join(map(str, steps[TUNING]))} steps"] if steps[TUNING] else [])
                       + ([f"not trained by {', '.join(untuned)}"] if untuned else []))
    return (f"# The ASR-robustness levers on {', '.join(splits)}\n\n"
            f"Written by `python scripts/asr_levers.py` from `{args.out / 'runs'}`: `{EXPERIMENT}` "
            f"({'/'.join(map(str, steps[EXPERIMENT]))} steps) then `{TUNING}` "
            f"({tuning}), each run's levers over both phases; dev scored on all "
            f"its cached tokens as model selection decodes them, Ref and ASR through `punctuate`'s decoding "
            f"(`evaluation.benchmark.evaluate_model`). F1 and SER in %; Δ F1 against the baseline of the same "
            f"seed.\n\n" + (f"![F1 per run and seed]({figure})\n\n" if figure else "")
            + "\n".join(table(chosen, chosen_splits) for chosen, chosen_splits in split_tables(results, splits))
            + "\n" + "\n".join(f"- `{name}`: {what}" for name, (what, _) in RUNS.items()
                               if any(r["run"] == name for r in results)) + "\n"
            + ("\n## What is kept\n\n" + "\n".join(verdicts(results, step_costs=step_costs)) + "\n"
               if "dev" in splits else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/asr_levers.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", default=list(DEFAULT_RUNS), choices=list(RUNS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--profile", help="profile of the params file (default: the file's own)")
    parser.add_argument("--features", type=Path, default=Path("data/features"), help=f"{EXPERIMENT}'s features")
    parser.add_argument("--tuning-features", type=Path, default=Path("data/features"),
                        help=f"{TUNING}'s features")
    parser.add_argument("--prepared", type=Path, default=Path("data/prepared"), help="the scored splits' words")
    parser.add_argument("--splits", nargs="+", default=["dev"], help="splits scored (dev; ref asr: only at the end)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--pipeline-model", "--baseline-model", dest="pipeline_model", type=Path,
                        help=f"the pipeline's own {TUNING} model directory: the run of params' seed trained with "
                             "its settings (not trained again)")
    parser.add_argument("--work", type=Path, default=Path("runs/asr_levers"), help="the trained models")
    parser.add_argument("--out", type=Path, default=Path("reports/asr_levers"), help="the results (JSON, markdown)")
    parser.add_argument("--train-set", type=parse_setting, action="append", default=[], metavar="KEY=VALUE",
                        help="a train setting over both phases of every run (e.g. max_steps=100: the same budget)")
    parser.add_argument("--model-set", type=parse_setting, action="append", default=[], metavar="KEY=VALUE",
                        help="a model setting over both phases (e.g. pretrained=/path/to/checkpoint)")
    parser.add_argument("--pause-after-s", type=float, metavar="SECONDS",
                        help="pause the training going on this many seconds after the start (checkpointed, its "
                             "wall time counted: the same command resumes it), for a run longer than the machine "
                             "time at hand; nothing is reported while a run is paused")
    parser.add_argument("--report-only", action="store_true",
                        help="train nothing: the report of every run already in --out/runs")
    args = parser.parse_args(argv)
    params = load_params(args.params, profile=args.profile)
    args.pause_at = None if args.pause_after_s is None else time.monotonic() + args.pause_after_s
    if args.report_only:
        done = {path.stem for path in (args.out / "runs").glob("*_seed*.json")}
        seeds = sorted({int(name.rsplit("_seed", 1)[1]) for name in done})
        args.seeds, args.runs = seeds, [run for run in RUNS if any(f"{run}_seed{seed}" in done for seed in seeds)]
    results = []
    for seed in args.seeds:
        for run in args.runs:
            path = args.out / "runs" / f"{run}_seed{seed}.json"
            if args.report_only and not path.is_file():
                continue
            if not path.is_file():
                print(f"== {run}, seed {seed}: {RUNS[run][0]}", flush=True)
                try:
                    result = train_and_score(params, run, seed, args)
                except RunPaused as paused:
                    print(f"paused: {paused}", flush=True)
                    return 3
                atomic_write_text(path, json.dumps(result, indent=1, default=str) + "\n")
            result = json.loads(path.read_text(encoding="utf-8"))
            missing = [split for split in args.splits if split not in result["scores"]]
            if missing and not args.report_only:  # its model scored on them now (a test split: once chosen on dev)
                if not Path(result["model_dir"], "config.json").is_file():
                    raise SystemExit(f"error: {path} has no scores for {', '.join(missing)} and its model "
                                     f"{result['model_dir']} is gone: remove {path} to train it again")
                print(f"== {run}, seed {seed}: scoring {', '.join(missing)}", flush=True)
                result["scores"].update(score(params, Path(result["model_dir"]), args.work / f"{run}_seed{seed}",
                                              args, missing))
                atomic_write_text(path, json.dumps(result, indent=1, default=str) + "\n")
            results.append(result)
    results.sort(key=lambda result: (list(RUNS).index(result["run"]), result["seed"]))  # a run's seeds together
    atomic_write_text(args.out / "levers.json", json.dumps(results, indent=1, default=str) + "\n")
    plot(results, list(args.splits), args.out / "levers.png")
    text = report(results, list(args.splits), args, figure="levers.png",
                  step_costs=read_step_costs(args.out / STEP_COSTS_FILE))
    atomic_write_text(args.out / "levers.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
