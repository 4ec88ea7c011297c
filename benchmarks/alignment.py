"""Accuracy and speed of the forced aligner (default backend: pocketsphinx).

    nice -n 19 .venv/bin/python benchmarks/alignment.py [--minutes 2.5] [--snr 20 10] [--voice slt]
                                  [--long-minutes 5] [--backend pocketsphinx] [--no-real] [--keep DIR]

Synthetic speech (flite): a built-in TED-style text (contractions, numbers, names) is repeated to about
``--minutes`` of audio and spoken by flite (``--voice``, 16 kHz) through :mod:`audio.reference_speech`, i.e.
the pipeline's own synthesis (:func:`audio.synthesis.synthesize_talk`). Reference word times are the engine's
own phone spans (the waveform is generated from exactly these). The boundary error is |aligned - reference| over
both boundaries (start, end) of every word the aligner placed confidently; reported as median, mean, share
within 20 ms and 50 ms, for all boundaries, for boundaries next to a pause (silence in the engine's output:
sentence or comma breaks) and for word-to-word junctions (:mod:`aligner.evaluation`, which the
pipeline's alignment stage uses for the same figures). The same audio is also aligned with white Gaussian
noise added at each ``--snr`` (dB, relative to the mean power of the whole clean signal, pauses included).

Real speech: the five LibriVox clips of Debian's ``pocketsphinx-testdata`` (16 kHz read speech, 25 s in
all) with their transcripts. The package ships no reference word times (only the transcripts and a
decoder's output), so what is measured is (a) the share of words placed confidently, (b) pause edges
against an energy detector: for every pause of >= 150 ms that the detector finds (leading and trailing
silence included), |end of the word before - pause start| and |start of the word after - pause end| (a
rough, independent check: the detector's edges are only as good as its threshold, floor + 25 % of the
5th-95th percentile energy range, and miss soft onsets), and (c) consistency: the five clips concatenated into one file
(aligned in 8 s windows, to exercise the long-audio path on real speech) against each clip aligned alone.

Speed: seconds of alignment (wall clock, audio loading included, flite excluded) per minute of audio, for
every run above and for a ``--long-minutes`` synthetic talk; the machine may be shared, so read the figure
as an upper bound. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy or torch loads (experiments/numerics.py)

import numpy as np  # noqa: E402

from aligner import AlignConfig, WordTiming, align  # noqa: E402
from aligner.audio import SAMPLE_RATE, load_audio  # noqa: E402
from aligner.evaluation import boundary_errors as score_boundaries  # noqa: E402
from aligner.evaluation import summarise_errors  # noqa: E402
from audio.reference_speech import Reference, flite_available, synthesize  # noqa: E402
from corpus.text import tokenize_for_inference  # noqa: E402

TEXT = """\
So, I want to tell you a story about a small town in Ohio. When I was seven years old, my grandmother
took me to the river, and she said: "Don't ever be afraid of the water." I didn't believe her. It's
strange, isn't it? We spend our lives learning what we shouldn't do, and then we're surprised that we
can't do anything at all.

Now, in 1998, about 6,400 people lived there. Today it's fewer than 2,000. The factory closed, the school
closed, and the young people left for Chicago and New York. Mr. Johnson, who ran the hardware store for
forty-two years, told me: "I'm not leaving. This is where my father's buried, and this is where I'll be
buried too."

Here's what I learned. First, people don't move because of money alone; they move because of stories.
Second, a community is not a place, it's a promise. And third, the numbers we read in the newspaper hide
the faces we'd recognize on the street. If you're a scientist, you'll say that's anecdotal. Maybe it is.
But I've spent ten years collecting these anecdotes, and together they look a lot like data.

Let me show you one more thing. This graph shows the price of bread from 1950 to 2010. You'd expect it to
go up, and it does, but look at what happens in the nineteen seventies. The line jumps, and it never comes
back down. Economists call that a structural break. My grandmother called it the year we stopped buying
butter. Thank you very much.
"""


def summarise(errors: list[float]) -> str:
    summary = summarise_errors(errors)
    if not summary["n"]:
        return "n=0"
    return (f"n={summary['n']:4d}  median {summary['median_ms']:6.1f} ms  mean {summary['mean_ms']:6.1f} ms  "
            f"<=20 ms {summary['within_20ms'] * 100:5.1f} %  <=50 ms {summary['within_50ms'] * 100:5.1f} %")


def boundary_errors(reference: Reference, timings: list[WordTiming]) -> dict[str, list[float]]:
    return score_boundaries(reference.timings, timings, reference.pause_before, reference.pause_after)


def timed_align(path: Path, words: list[str], backend: str, config: AlignConfig) -> tuple[list[WordTiming], float]:
    started = time.perf_counter()
    timings = align(path, words, backend=backend, config=config)
    return timings, time.perf_counter() - started


def report(label: str, reference: Reference, timings: list[WordTiming], seconds: float, duration: float) -> None:
    placed = sum(timing.aligned for timing in timings)
    print(f"\n{label}: {duration / 60:.2f} min of audio, {len(timings)} words, {placed} aligned "
          f"({len(timings) - placed} flagged), {seconds:.2f} s = {seconds / (duration / 60):.2f} s per audio minute")
    for name, errors in boundary_errors(reference, timings).items():
        print(f"  {name:9s} {summarise(errors)}")


def add_noise(path: Path, snr_db: float, out: Path, seed: int = 0) -> Path:
    import soundfile

    samples = load_audio(path)
    power = float(np.mean(samples.astype(np.float64) ** 2))
    noise = np.random.default_rng(seed).normal(0.0, math.sqrt(power / 10 ** (snr_db / 10)), len(samples))
    soundfile.write(str(out), np.clip(samples + noise, -1, 1).astype(np.float32), SAMPLE_RATE, subtype="PCM_16")
    return out


def synthetic_talk(minutes: float, wav: Path, voice: str) -> Reference:
    """TEXT repeated until flite speaks at least ``minutes`` (within 10 %)."""
    text = TEXT
    while True:
        reference = synthesize(text, wav, voice=voice)
        if reference.duration >= minutes * 60 * 0.9 or len(text) > 200_000:
            return reference
        repeats = max(1, math.ceil(minutes * 60 * 0.9 / reference.duration * text.count(TEXT))) - text.count(TEXT)
        text = text + ("\n" + TEXT) * max(1, repeats)


def synthetic(args, workdir: Path, config: AlignConfig) -> None:
    wav = workdir / "synthetic.wav"
    reference = synthetic_talk(args.minutes, wav, args.voice)
    missing = sum(not timing.has_time for timing in reference.timings)
    print(f"synthetic: flite voice {args.voice}, {reference.duration:.1f} s, {len(reference.words)} tokens "
          f"({missing} without a reference time)")
    timings, seconds = timed_align(wav, reference.words, args.backend, config)
    report("clean", reference, timings, seconds, reference.duration)
    for snr in args.snr:
        noisy = add_noise(wav, snr, workdir / f"noisy{snr:g}.wav")
        timings, seconds = timed_align(noisy, reference.words, args.backend, config)
        report(f"white noise, SNR {snr:g} dB", reference, timings, seconds, reference.duration)


def long_talk(args, workdir: Path, config: AlignConfig) -> None:
    wav = workdir / "long.wav"
    reference = synthetic_talk(args.long_minutes, wav, args.voice)
    timings, seconds = timed_align(wav, reference.words, args.backend, config)
    report("long synthetic talk (speed)", reference, timings, seconds, reference.duration)


LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")


def pause_edges(samples: np.ndarray, min_pause_s: float = 0.15) -> list[tuple[float, float]]:
    """(start, end) of low-energy stretches >= min_pause_s: 10 ms frames below floor + 25 % of the range."""
    hop = SAMPLE_RATE // 100
    frames = samples[: len(samples) // hop * hop].reshape(-1, hop).astype(np.float64)
    energy = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)
    floor, peak = np.percentile(energy, 5), np.percentile(energy, 95)
    quiet = energy < floor + 0.25 * (peak - floor)
    pauses, index = [], 0
    while index < len(quiet):
        if quiet[index]:
            end = index
            while end < len(quiet) and quiet[end]:
                end += 1
            if (end - index) / 100 >= min_pause_s:
                pauses.append((index / 100, end / 100))
            index = end
        else:
            index += 1
    return pauses


def real_speech(args, workdir: Path, config: AlignConfig) -> None:
    import soundfile

    if not (LIBRIVOX / "transcription").exists():
        print("\nreal speech: skipped (apt-get install pocketsphinx-testdata)")
        return
    clips = []
    for line in (LIBRIVOX / "transcription").read_text().splitlines():
        text, _, name = line.rpartition("(")
        words = tokenize_for_inference(text.replace("<s>", "").replace("</s>", ""))
        clips.append((LIBRIVOX / f"{name.strip(' )')}.wav", words))
    total_s, total_time, placed, count, edge_errors, alone = 0.0, 0.0, 0, 0, [], []
    for path, words in clips:
        samples = load_audio(path)
        timings, seconds = timed_align(path, words, args.backend, config)
        total_s += len(samples) / SAMPLE_RATE
        total_time += seconds
        placed += sum(t.aligned for t in timings)
        count += len(timings)
        alone.append(timings)
        for start, end in pause_edges(samples):
            before = [t for t in timings if t.aligned and t.end <= start + 0.1]
            after = [t for t in timings if t.aligned and t.start >= end - 0.1]
            if before:  # the word that ends where the pause starts
                edge_errors.append(abs(before[-1].end - start))
            if after:  # the word that starts where the pause ends
                edge_errors.append(abs(after[0].start - end))
    print(f"\nreal speech (LibriVox, {len(clips)} clips, {total_s:.1f} s, {count} words): {placed} aligned "
          f"({count - placed} flagged), {total_time / (total_s / 60):.2f} s per audio minute")
    print(f"  pause edges vs energy detector  {summarise(edge_errors)}")
    joined, offsets, words_all = [], [], []
    for path, words in clips:
        offsets.append(sum(len(part) for part in joined) / SAMPLE_RATE)
        joined.append(load_audio(path))
        words_all += words
    long_path = workdir / "librivox_joined.wav"
    soundfile.write(str(long_path), np.concatenate(joined), SAMPLE_RATE, subtype="PCM_16")
    windowed = dataclasses.replace(config, max_single_pass_s=8.0, window_s=8.0)  # force the windowed path
    timings, _ = timed_align(long_path, words_all, args.backend, windowed)
    differences, position = [], 0
    for offset, clip_timings in zip(offsets, alone):
        for single in clip_timings:
            together = timings[position]
            position += 1
            if single.aligned and together.aligned:
                differences += [abs(together.start - offset - single.start), abs(together.end - offset - single.end)]
    print(f"  joined file (8 s windows) vs clip alone  {summarise(differences)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=2.5, help="length of the synthetic talk")
    parser.add_argument("--snr", type=float, nargs="*", default=[20.0, 10.0], help="noise levels (dB)")
    parser.add_argument("--voice", default="slt", help="flite voice (16 kHz: slt, awb, rms, kal16)")
    parser.add_argument("--backend", default="pocketsphinx")
    parser.add_argument("--long-minutes", type=float, default=5.0,
                        help="length of the talk timed for speed (0: skip)")
    parser.add_argument("--no-real", action="store_true", help="skip the LibriVox clips")
    parser.add_argument("--keep", help="keep the audio in this directory")
    args = parser.parse_args()
    if not flite_available():
        sys.exit("benchmarks/alignment.py needs flite (apt-get install flite)")
    config = AlignConfig()
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(args.keep or scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        synthetic(args, workdir, config)
        if args.long_minutes > 0:
            long_talk(args, workdir, config)
        if not args.no_real:
            real_speech(args, workdir, config)


if __name__ == "__main__":
    main()
