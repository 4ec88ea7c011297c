"""Throughput of the align and features stages, their speed-up from 1 to 2 workers, and what 452 h would take.

    nice -n 19 .venv/bin/python -m benchmarks.alignment_throughput [--talks 8] [--minutes 2] [--workers 1 2]
        [--hours 452] [--cores 1 16 64] [--json FILE] [--markdown FILE] [--keep DIR]
    .venv/bin/python -m benchmarks.alignment_throughput --tiny         # a check that it runs (seconds; no figures)

Material: ``--talks`` talks of about ``--minutes`` minutes each, spoken by flite (voices slt, awb, rms, kal16 in
turn; texts from the built-in TED-style text of ``benchmarks/alignment.py``, paragraphs rotated per talk) through the
pipeline's own synthesize stage (:func:`audio.synthesize_stage.make_talk_audio`, as a ``train`` split). Then, for
each ``--workers`` count, the pipeline's stages exactly as DVC runs them: :func:`audio.align_stage.align_talks`
(pocketsphinx) and :func:`audio.features_stage.token_features`, into fresh folders (nothing reused).

Measured per stage and worker count: wall time and CPU time (this process and its worker processes, flite's
subprocesses included: ``getrusage`` of self and children), giving **audio minutes per CPU second** and per wall
second. Worker processes start fresh in each run (imports, numba's compilation of librosa's pitch tracker), a cost
that a corpus of hundreds of hours pays once per worker: it is timed separately (``startup_s``: the same pool doing
one tiny talk per worker) and taken off for the *steady* speed-up; the raw speed-up is reported too. The 1-worker
run works in this process, after a warm-up of the same imports.

Projection for ``--hours`` of audio (TED-LIUM 3: 452 h) on each of ``--cores``: CPU hours = audio / (audio minutes
per CPU second, 1 worker); wall hours on C cores = CPU hours / (C x e), e the parallel efficiency measured from 1 to
2 workers (steady speed-up / 2, at most 1), **assumed to hold at C cores** (talks are independent and share nothing
but the disk; reading 452 h of 16 kHz audio, ~52 GB, is not modelled). The material is synthetic speech: real
recordings (noise, music, applause, faster speech) align more slowly, so read the projection as a lower bound.

Run it on an idle machine (``nice`` protects others, not the figures); the machine is described in the output.
It runs under the stages' pinned numerics (experiments/numerics.py): the kernels the pipeline runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy or torch loads (experiments/numerics.py)

from executor.tasks import available_cores, run_tasks  # noqa: E402
from audio.align_stage import align_talks  # noqa: E402
from audio.features import FeatureConfig  # noqa: E402
from audio.features_stage import token_features  # noqa: E402
from audio.reference_speech import flite_available  # noqa: E402
from audio.synthesize_stage import make_talk_audio  # noqa: E402
from corpus.io import atomic_write_text  # noqa: E402
from corpus.iwslt import write_iwslt  # noqa: E402
from corpus.text import normalize_transcript  # noqa: E402

VOICES = ["flite:slt", "flite:awb", "flite:rms", "flite:kal16"]
#: flite speaks about this many benchmark tokens per second of audio (measured on the built-in text)
TOKENS_PER_SECOND = 2.9
STAGES = ("align", "features")


def _paragraphs() -> list[str]:
    from benchmarks.alignment import TEXT

    return [paragraph.replace("\n", " ") for paragraph in TEXT.split("\n\n") if paragraph.strip()]


def write_material(root: Path, talks: int, minutes: float) -> dict[str, Any]:
    """A prepared ``train`` split of ``talks`` talks and their flite audio (the synthesize stage); its report."""
    paragraphs = _paragraphs()
    prepared = root / "prepared"
    prepared.mkdir(parents=True, exist_ok=True)
    words: list[str] = []
    labels: list[str] = []
    lines = ["talk\tfirst_token\ttokens"]
    target = max(8, int(minutes * 60 * TOKENS_PER_SECOND))
    for number in range(talks):
        talk_words: list[str] = []
        talk_labels: list[str] = []
        index = number
        while len(talk_words) < target:
            w, l = normalize_transcript(paragraphs[index % len(paragraphs)])
            talk_words += w
            talk_labels += l
            index += 1
        cut = next((k + 1 for k in range(target - 1, len(talk_words)) if talk_labels[k] == "PERIOD"), len(talk_words))
        lines.append(f"talk{number:03d}\t{len(words)}\t{cut}")
        words += talk_words[:cut]
        labels += talk_labels[:cut]
    write_iwslt(prepared / "train.tsv", words, labels)
    (prepared / "train_talks.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = make_talk_audio(prepared, root, root / "audio", source="synthesize", real_audio_dir=None,
                             text="punctuated", voices=VOICES, rate_range=[0.95, 1.05], pitch_range=[0.95, 1.05],
                             seed=1, max_chunk_tokens=80, dev_pseudo_talk_tokens=1500, split_tokens={"train": None},
                             talk_sources={})
    if report["failed"]:
        raise RuntimeError(f"synthesis failed: {report['failed']}")
    return report


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(run: Callable[[], Any]) -> tuple[float, float, Any]:
    """``(wall seconds, CPU seconds of this process and its children, result)`` of ``run()``."""
    cpu, wall = _cpu_seconds(), time.perf_counter()
    result = run()
    return time.perf_counter() - wall, _cpu_seconds() - cpu, result


def warm_up(task: tuple[str, str]) -> int:
    """What a fresh worker pays once: the stage's imports and, for features, numba's compilation (one short clip)."""
    stage, wav = task
    if stage == "align":
        from aligner import align

        align(wav, ["hello"])
    else:
        from aligner import WordTiming
        from audio.features import talk_features

        talk_features(wav, [WordTiming("hello", 0.1, 0.6, True)], config=FeatureConfig())
    return os.getpid()


def clip(root: Path) -> Path:
    from audio.reference_speech import synthesize

    path = root / "clip.wav"
    if not path.exists():
        synthesize("Hello.", path)
    return path


def run_stage(stage: str, root: Path, workers: int, name: str) -> dict[str, Any]:
    out = root / "runs" / name
    prepared, audio = root / "prepared", root / "audio"
    if stage == "align":
        wall, cpu, report = measure(lambda: align_talks(audio, prepared, out / "alignments", backend="pocketsphinx",
                                                        backend_config={}, workers=workers))
        failed = report["failed"]
    else:
        alignments = root / "runs" / "align-w1" / "alignments"
        wall, cpu, report = measure(lambda: token_features(alignments, audio, prepared, out / "acoustic",
                                                           splits=["train"], config=FeatureConfig(), workers=workers))
        failed = report["splits"]["train"]["failed"]
    if failed:
        raise RuntimeError(f"{stage} failed on {failed}")
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}


def benchmark(root: Path, *, talks: int, minutes: float, workers: list[int], hours: float,
              cores: list[int]) -> dict[str, Any]:
    audio_report = write_material(root, talks, minutes)
    audio_minutes = audio_report["splits"]["train"]["minutes"]
    results: dict[str, Any] = {stage: {} for stage in STAGES}
    for stage in STAGES:
        warm_up((stage, str(clip(root))))  # this process: imports and compilation, before the 1-worker timing
        for count in sorted(set(workers)):
            measured = run_stage(stage, root, count, f"{stage}-w{count}")
            if count > 1:  # the pool's own start-up, as each run above paid it
                startup, _, _ = measure(lambda: run_tasks(warm_up, [(stage, str(clip(root)))] * count,
                                                          workers=count))
                measured["startup_s"] = round(startup, 3)
            measured["audio_minutes_per_cpu_s"] = round(audio_minutes / measured["cpu_s"], 4)
            measured["audio_minutes_per_wall_s"] = round(audio_minutes / measured["wall_s"], 4)
            results[stage][str(count)] = measured
    speedup: dict[str, Any] = {}
    if 1 in workers and 2 in workers:
        for stage in STAGES:
            one, two = results[stage]["1"], results[stage]["2"]
            steady = one["wall_s"] / max(1e-9, two["wall_s"] - two.get("startup_s", 0.0))
            speedup[stage] = {"raw": round(one["wall_s"] / two["wall_s"], 3), "steady": round(steady, 3)}
        both_one = sum(results[s]["1"]["wall_s"] for s in STAGES)
        both_two = sum(results[s]["2"]["wall_s"] - results[s]["2"].get("startup_s", 0.0) for s in STAGES)
        speedup["both"] = {"raw": round(both_one / sum(results[s]["2"]["wall_s"] for s in STAGES), 3),
                           "steady": round(both_one / max(1e-9, both_two), 3)}
    base = str(min(workers))
    cpu_hours = {stage: hours * 60 / results[stage][base]["audio_minutes_per_cpu_s"] / 3600 for stage in STAGES}
    cpu_hours["total"] = sum(cpu_hours.values())
    efficiency = min(1.0, speedup["both"]["steady"] / 2) if speedup else 1.0
    projection = {
        "hours_of_audio": hours,
        "cpu_hours": {key: round(value, 2) for key, value in cpu_hours.items()},
        "parallel_efficiency": round(efficiency, 3),
        "wall_hours": {str(c): round(cpu_hours["total"] / (c * (1.0 if c == 1 else efficiency)), 2) for c in cores},
        "wall_hours_ideal": {str(c): round(cpu_hours["total"] / c, 2) for c in cores},
        "assumptions": ("per-core throughput of the 1-worker runs; on C > 1 cores the efficiency measured from 1 to 2 "
                        "workers (steady); disk reads and worker start-up not modelled; synthetic speech (real "
                        "recordings align more slowly: a lower bound)"),
    }
    return {
        "machine": {"cores": available_cores(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "processor": platform.processor() or platform.machine(), "python": platform.python_version(),
                    "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
        "material": {"talks": talks, "audio_minutes": audio_minutes, "voices": VOICES,
                     "tokens": audio_report["splits"]["train"]["tokens_with_audio"]},
        "workers": sorted(set(workers)),
        **results,
        "speedup_1_to_2": speedup,
        "projection": projection,
    }


def markdown(result: dict[str, Any]) -> str:
    machine, material, projection = result["machine"], result["material"], result["projection"]
    lines = [
        "# Alignment and feature throughput",
        "",
        f"`python -m benchmarks.alignment_throughput`: {material['talks']} flite talks, {material['audio_minutes']:.1f} "
        f"audio minutes ({material['tokens']:,} tokens), the pipeline's align (pocketsphinx) and features stages; "
        f"{machine['cores']} cores ({machine['processor']}, {machine['platform']}), load average at start "
        f"{machine['load_average_at_start']}.",
        "",
        "| stage | workers | wall s | CPU s | audio min per CPU s | audio min per wall s | worker start-up s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for stage in STAGES:
        for count, row in result[stage].items():
            lines.append(f"| {stage} | {count} | {row['wall_s']:.1f} | {row['cpu_s']:.1f} | "
                         f"{row['audio_minutes_per_cpu_s']:.3f} | {row['audio_minutes_per_wall_s']:.3f} | "
                         f"{row.get('startup_s', '-')} |")
    speedup = result["speedup_1_to_2"]
    if speedup:
        lines += ["", "Speed-up from 1 to 2 workers (wall time; steady = without the workers' start-up): "
                  + "; ".join(f"{stage} {value['raw']:.2f}x raw, {value['steady']:.2f}x steady"
                              for stage, value in speedup.items()) + "."]
    lines += [
        "",
        f"Projection for {projection['hours_of_audio']:g} h of audio: {projection['cpu_hours']['total']:.1f} CPU hours "
        f"(align {projection['cpu_hours']['align']:.1f}, features {projection['cpu_hours']['features']:.1f}); "
        f"parallel efficiency {projection['parallel_efficiency']:.2f}.",
        "",
        "| cores | wall hours (measured efficiency) | wall hours (ideal) |",
        "|---:|---:|---:|",
    ]
    for cores, hours in projection["wall_hours"].items():
        lines.append(f"| {cores} | {hours:.2f} | {projection['wall_hours_ideal'][cores]:.2f} |")
    lines += ["", f"Assumptions: {projection['assumptions']}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.alignment_throughput", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--talks", type=int, default=8, help="number of talks (default 8)")
    parser.add_argument("--minutes", type=float, default=2.0, help="minutes of speech per talk (default 2)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to time (default 1 2)")
    parser.add_argument("--hours", type=float, default=452.0, help="hours of audio to project for (TED-LIUM 3: 452)")
    parser.add_argument("--cores", type=int, nargs="+", default=[1, 16, 64], help="core counts of the projection")
    parser.add_argument("--json", help="also write the figures here (JSON)")
    parser.add_argument("--markdown", help="also write the report here (Markdown)")
    parser.add_argument("--keep", help="work in this folder and keep it (default: a temporary folder)")
    parser.add_argument("--tiny", action="store_true",
                        help="2 talks of 15 s: checks that the benchmark runs (the figures mean nothing)")
    args = parser.parse_args(argv)
    if args.tiny:
        args.talks, args.minutes = 2, 0.25
    if 1 not in args.workers:
        parser.error("--workers must include 1 (the baseline of the throughput and the speed-up)")
    if not flite_available():
        print("error: the benchmark needs flite (apt-get install flite)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="alignment-throughput-") as scratch:
        root = Path(args.keep or scratch)
        root.mkdir(parents=True, exist_ok=True)
        result = benchmark(root, talks=args.talks, minutes=args.minutes, workers=args.workers, hours=args.hours,
                           cores=args.cores)
    result["tiny"] = args.tiny
    text = markdown(result)
    print(text)
    print(json.dumps(result))
    if args.json:
        atomic_write_text(args.json, json.dumps(result, indent=1) + "\n")
    if args.markdown:
        atomic_write_text(args.markdown, text)
    return 0


if __name__ == "__main__":  # guarded: worker processes started with "spawn" import this module again
    sys.exit(main())
