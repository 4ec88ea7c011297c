"""DVC stage ``synthesize``: audio for every talk of the benchmark splits (synthetic speech or real recordings).

    python -m pipeline.synthesize [--params params.yaml] [--prepared data/prepared] [--out data/audio]
                                  [--metrics metrics/audio.json]

Reads ``data.iwslt_dir`` (the XML sources that cut test2011/test2011asr into talks) and the ``audio`` section
of the params file (``tedlium_dir`` and ``tedlium`` only with ``source: tedlium``: TED-LIUM recordings matched to
the talks, :mod:`audio.tedlium`), and runs :func:`audio.synthesize_stage.make_talk_audio`: per talk
``<out>/<split>/<talk>.wav`` (+ the engine's word timings), the talks table ``<out>/talks.tsv`` and
``<out>/audio_report.json``. Resumable: a talk already made with the same settings is kept. Writes the report
to the metrics file and prints a summary. A talk that fails does not stop the others, but the stage then exits 1
(after writing every output), so that DVC does not record it as done.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from audio.stage_common import failed_talks_exit
from audio.synthesize_stage import make_talk_audio
from audio.tedlium import TedliumConfig
from experiments.params import ParamsError, require
from pipeline.stage import stage_parser, start, write_metrics


def main(argv: Sequence[str] | None = None) -> int:
    parser = stage_parser("pipeline.synthesize", __doc__, out="data/audio", metrics="metrics/audio.json",
                          prepared=True, quiet=True)
    args, params = start(parser, argv)

    data = require(params, "data", "params")
    audio = require(params, "audio", "params")
    split_tokens = require(audio, "split_tokens", "audio")
    source = require(audio, "source", "audio")
    tedlium_dir = tedlium = None
    if source == "tedlium":
        tedlium_dir = require(audio, "tedlium_dir", "audio")
        settings = dict(require(audio, "tedlium", "audio") or {})
        known = {field.name for field in dataclasses.fields(TedliumConfig)}
        if set(settings) - known:
            raise ParamsError(f"params: audio.tedlium has unknown settings {sorted(set(settings) - known)}; "
                              f"known: {sorted(known)}")
        tedlium = TedliumConfig(**settings)
    report = make_talk_audio(
        args.prepared,
        require(data, "iwslt_dir", "data"),
        args.out,
        source=source,
        real_audio_dir=require(audio, "real_audio_dir", "audio"),
        text=require(audio, "text", "audio"),
        voices=list(require(audio, "voices", "audio")),
        rate_range=[float(x) for x in require(audio, "rate_range", "audio")],
        pitch_range=[float(x) for x in require(audio, "pitch_range", "audio")],
        seed=int(require(audio, "seed", "audio")),
        max_chunk_tokens=int(require(audio, "max_chunk_tokens", "audio")),
        dev_pseudo_talk_tokens=int(require(audio, "dev_pseudo_talk_tokens", "audio")),
        split_tokens={split: (None if limit is None else int(limit)) for split, limit in split_tokens.items()},
        talk_sources=dict(require(audio, "talk_sources", "audio")),
        tedlium_dir=tedlium_dir,
        tedlium=tedlium,
        progress=not args.quiet,
    )
    metrics_path = write_metrics(args.metrics, report, ensure_ascii=False)

    print(f"synthesize: {report['source']} ({report['text']}), {report['seconds']:.1f} s -> {args.out}; "
          f"{report['hours_total']:.2f} h of audio")
    for split, info in report["splits"].items():
        rate = info["compute_seconds_per_audio_minute"]
        print(f"  {split}: {info['talks_with_audio']}/{info['talks']} talks with audio, {info['minutes']:.1f} min, "
              f"{info['tokens_with_audio']:,}/{info['tokens']:,} tokens; made {info['talks_made_this_run']}, "
              f"reused {info['talks_reused_this_run']}, failed {info['talks_failed']}, excluded {info['talks_excluded']}"
              + (f"; {rate} s per audio minute" if rate is not None else ""))
    if "tedlium" in report:
        tedlium_report = report["tedlium"]
        unmatched = tedlium_report["recordings_unmatched"]
        print(f"  TED-LIUM {tedlium_report['dir']}: {tedlium_report['recordings_matched']} of "
              f"{tedlium_report['recordings']} recordings matched (talks by split: {tedlium_report['talks_matched']}), "
              f"{tedlium_report['talks_anchored']} talks anchored by their STM segments; every recording in "
              f"{tedlium_report['matches_file']}")
        for item in unmatched[:10]:
            print(f"    unmatched {item['recording']}: {item['reason']}")
        if tedlium_report["recordings_unmatched_count"] > 10:
            print(f"    ... and {tedlium_report['recordings_unmatched_count'] - 10} more unmatched recordings")
        for problem in tedlium_report["layout_problems"]:
            print(f"    WARNING {problem}")
    print(f"  wrote {metrics_path}")
    return failed_talks_exit(report["failed"], "synthesize")


if __name__ == "__main__":
    raise SystemExit(main())
