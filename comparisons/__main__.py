"""A/B comparisons (the library: :mod:`comparisons`)::

    python -m comparisons run SPEC [--seeds 1 2] [--work runs/comparisons] [--out reports/comparisons]
    python -m comparisons report SPEC [--report-test] [--work runs/comparisons] [--out reports/comparisons]

``run`` trains and scores every arm and seed of the spec not done yet (A1, B1, A2, B2, ...; it resumes), then
writes ``OUT/NAME.md`` and ``OUT/NAME.json``; ``report`` writes them again from the results in ``OUT/NAME/``.
``--report-test`` scores the test splits (Ref, ASR) once the verdict is written, as reported figures that choose
nothing. Exit status 2: a spec or a state that cannot go on (the message says why).
"""

from experiments.numerics import pin_numerics

pin_numerics()  # first: the scoring here runs under the pipeline's numerics, as the trainings it starts

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from comparisons.ab import DEFAULT_OUT, DEFAULT_WORK, ComparisonError, run_comparison  # noqa: E402
from comparisons.report import score_test_splits, write_report  # noqa: E402
from comparisons.spec import SpecError, load_spec  # noqa: E402
from experiments.params import ParamsError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m comparisons", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "report"):
        command = commands.add_parser(name)
        command.add_argument("spec", type=Path, help="the spec (comparisons/specs/NAME.yaml)")
        command.add_argument("--work", type=Path, default=DEFAULT_WORK, help=f"models (default: {DEFAULT_WORK})")
        command.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"results (default: {DEFAULT_OUT})")
    commands.choices["run"].add_argument("--seeds", type=int, nargs="+", help="only these of the spec's seeds")
    commands.choices["report"].add_argument(
        "--report-test", action="store_true",
        help="after the verdict: score the test splits (evaluate.test_splits), reported, choosing nothing")
    args = parser.parse_args(argv)
    try:
        spec = load_spec(args.spec)
        if args.command == "run":
            run_comparison(spec, seeds=args.seeds, work=args.work, out=args.out)
            summary = write_report(spec, args.out)
        elif args.report_test:
            summary = score_test_splits(spec, args.out, args.work)
        else:
            summary = write_report(spec, args.out)
    except (ComparisonError, SpecError, ParamsError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print((args.out / f"{spec.name}.md").read_text(encoding="utf-8"))
    print(f"verdict: {summary['verdict']['why']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
