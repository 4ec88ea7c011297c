"""``punctuate``: restore punctuation in a transcript, or in a whole corpus of them, with a trained model directory.

    punctuate --model artifacts/model transcript.txt -o transcript.punct.txt
    cat transcript.txt | punctuate --model artifacts/model --format iwslt
    punctuate --alignment talk.words.tsv talk.txt          # with the words' times (speech model)
    punctuate --audio talk.wav talk.txt                    # aligns the transcript to the recording first
    punctuate corpus/ -o punctuated/ --timings-dir asr/ --workers 2     # a corpus (inference/batch.py)

Models: without --model, the model directories named in params.yaml (section ``punctuate``: ``text_model``,
or ``audio_model`` when speech is given), relative to that file; the params file is --params, else
./params.yaml, else the one of the repository this command comes from.

Speech: --alignment takes the transcript's word times in the formats ASR systems write, told by the file's
extension or --timings-format: the aligner's TSV (``word<TAB>start<TAB>end``, a header line optional, both
time cells empty for a word without a time; any other extension), NIST/Kaldi CTM (``.ctm``: ``utterance
channel start duration word [confidence]``; of several utterances, the one named as the transcript's file) or
a recogniser's JSON word list (``.json``: ``{word|text, start, end}`` objects, at the top level or under
``words``, ``result`` or ``segments[].words``). The words must be the transcript's, in order: one row per word,
or per benchmark token as ``python -m aligner`` writes them. --audio runs the aligner (pocketsphinx) on the
recording first. A model trained with timing cues reads the pause after each word and how long it was held;
without speech the same model punctuates from the text alone. Timings whose words are not the transcript's,
or whose times are not numbers, negative or out of order, are an error naming the file and line (or entry); a
recogniser's markup and fillers the transcript lacks are skipped, bare clitics (``'s``) and overlapping times taken
(inference/speech_input.py).

A corpus (several inputs, or a folder: every ``*.txt`` below it): ``-o`` is the output folder, which mirrors
the inputs' relative paths; --timings-dir pairs each transcript with its word times by name
(inference/batch_inputs.py). The model is loaded once per process, outputs are written atomically, and a run
stopped half-way resumes where it stopped (a finished output whose transcript, timings and model are unchanged
is skipped). A transcript that cannot be read or whose timings do not match is named with the reason and the
others are finished; the exit status is then 1. --workers N runs N local processes, --dask ADDRESS a Dask
cluster: the same bytes whichever, and the bytes the single-file command writes (--share-batches, which fills
the model's batches from several transcripts for a GPU, gives that up; see inference/punctuator.py).

--format json writes each word with its label and the model's probability of each label (O, COMMA, PERIOD,
QUESTION), those its label was taken from.

Your words are never changed: the text is split at whitespace and every word is written back byte for byte,
with its case and the whitespace (line breaks included) around it. The tool only

* inserts a predicted mark (, . ?) after a word, in place of the mark that stood there (, ; : . ! ? ... --
  at a word's end, or standing alone between words, are replaced; marks inside a word -- 6.8, it'll, e-mail
  addresses, URLs -- are part of it; U.S., Mr., e.g. keep their period; a closing quote or bracket stays
  where it was), and
* capitalises sentence starts and the pronoun "i" (only words written all in lower case; --keep-case turns
  this off).

The model reads each word in the benchmark's tokenisation (won't -> "wo n't", lower-cased) and the label of
a word's last token is the mark after the word. Words the model has no tokens for (emoji, symbols,
(stage notes)) are written back unchanged and get no mark. --format iwslt writes one 'word<TAB>LABEL' line
per word, the word as you gave it (won't stays one word). Details: corpus/user_text.py.

Where it runs: on the CPU (--device cuda or auto asks for a GPU), on --threads torch threads (default 2), under
the evaluate stage's numeric environment (experiments/numerics.py), so that its labels are the ones the stage
scored, on any x86-64 CPU and whatever the thread count (tests/test_inference_threads.py).
"""

from __future__ import annotations

# The evaluate stage's numerics first (experiments.numerics), before anything can load numpy or torch: the labels
# are then the ones it scored on any CPU (in a program that loaded them already, the program's numerics stay).
from experiments.numerics import numeric_facts, pin_numerics

pin_numerics()

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

# Only light modules at import time: `punctuate --help` must not load torch; the model code is imported
# once the arguments, the input and the output folder have been checked.
from corpus.io import atomic_write_text  # noqa: E402
from inference.outputs import FORMATS, format_punctuated  # noqa: E402


class InputError(Exception):
    """Input that cannot be read as text; the message names the input."""


class OutputError(Exception):
    """An output path that cannot be written; the message names the path."""


class ModelChoiceError(Exception):
    """No --model and no usable ``punctuate`` section in the params file; the message says what is missing."""


#: inference.speech_input.TIMINGS_FORMATS (not imported here: it brings numpy before the arguments are read)
TIMINGS_FORMAT_NAMES = ("tsv", "ctm", "json")
PARAMS_FILE = "params.yaml"
REPOSITORY_PARAMS = Path(__file__).resolve().parents[1] / PARAMS_FILE


def default_model(params: str | None, speech: bool) -> Path:
    """The model directory named by ``punctuate.text_model`` (``audio_model`` when ``speech``) of the params
    file (``params``, else ./params.yaml, else the repository's), relative to that file's folder."""
    import yaml  # light, but only needed here

    if params is not None:
        path = Path(params)
    elif Path(PARAMS_FILE).is_file():
        path = Path(PARAMS_FILE)
    else:
        path = REPOSITORY_PARAMS
    key = "audio_model" if speech else "text_model"
    if not path.is_file():
        raise ModelChoiceError(f"no --model given and no params file at {path} to take punctuate.{key} from")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ModelChoiceError(f"{path}: cannot read it for punctuate.{key}: {error}") from error
    section = data.get("punctuate") if isinstance(data, dict) else None
    if not isinstance(section, dict) or not section.get(key):
        raise ModelChoiceError(f"no --model given and {path} names no punctuate.{key}")
    model = Path(section[key])
    return model if model.is_absolute() else path.resolve().parent / model


def read_text(source: str | None) -> tuple[str, str]:
    """Return ``(name, text)`` of a file path, or of standard input when ``source`` is None or '-'."""
    if source in (None, "-"):
        name, data = "<stdin>", sys.stdin.buffer.read()
    else:
        path = Path(source)
        if not path.exists():
            raise InputError(f"{path}: no such file")
        if not path.is_file():
            raise InputError(f"{path}: not a regular file")
        try:
            data = path.read_bytes()
        except OSError as error:
            raise InputError(f"{path}: cannot read ({error.strerror or error})") from error
        name = str(path)
    from inference.batch_inputs import TranscriptError, decode_text

    try:
        return name, decode_text(data, name)
    except TranscriptError as error:
        raise InputError(str(error)) from error


def check_output(destination: str | None) -> None:
    """Make sure ``destination`` can be written *before* any work is done; OutputError names the path.

    The nearest existing folder on the way to the file is probed by creating (and removing) a uniquely named
    file in it, which is what the final atomic write will do.
    """
    if destination in (None, "-"):
        return
    path = Path(destination)
    if path.is_dir():
        raise OutputError(f"{path}: is a directory, not a file (to write into a folder, give a folder of "
                          "transcripts or several files)")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OutputError(f"cannot write {path}: {folder} is not a directory")
    try:
        descriptor, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=folder)
    except OSError as error:
        raise OutputError(f"cannot write {path}: folder {folder} is not writable ({error.strerror or error})") \
            from error
    os.close(descriptor)
    os.unlink(probe)


def write_output(destination: str | None, content: str) -> None:
    """Write to standard output (UTF-8 bytes, line ends as given) or atomically to a file.

    A file is written to a unique temporary file beside it and renamed over it when complete
    (:func:`corpus.io.atomic_path`), so two runs writing the same file never mix their output.
    """
    if destination in (None, "-"):
        sys.stdout.flush()
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is None:
            sys.stdout.write(content)
        else:
            buffer.write(content.encode("utf-8"))
            buffer.flush()
        return
    try:
        atomic_write_text(destination, content)
    except OSError as error:
        raise OutputError(f"cannot write {destination}: {error.strerror or error}") from error


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="punctuate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", nargs="*",
                        help="text file to punctuate (default: standard input); several files or folders (every "
                             "*.txt below them): a corpus, into the folder -o")
    parser.add_argument("--model", help="trained model directory (default: punctuate.text_model of params.yaml, "
                                        "or punctuate.audio_model with --alignment/--audio/--timings-dir)")
    parser.add_argument("--params", help="params file naming the default models (default: ./params.yaml, else "
                                         "the repository's)")
    speech = parser.add_mutually_exclusive_group()
    speech.add_argument("--alignment", metavar="TIMINGS",
                        help="the transcript's word timings: TSV (word<TAB>start<TAB>end, seconds; empty cells for a "
                             "word without a time), CTM or JSON word list (by extension, or --timings-format)")
    speech.add_argument("--audio", metavar="AUDIO",
                        help="a recording of the transcript (WAV/FLAC/...): aligned with pocketsphinx first")
    speech.add_argument("--timings-dir", metavar="DIR",
                        help="a corpus's word timings: NAME.tsv|ctm|json beside each transcript NAME.txt's relative "
                             "path, or its utterance NAME in the folder's other CTM files")
    parser.add_argument("--timings-format", choices=TIMINGS_FORMAT_NAMES,
                        help="the format of the timings (default: told by the extension; TSV for any other); with "
                             "--timings-dir, only files of this format are looked at")
    parser.add_argument("-o", "--output", help="where to write the result (default: standard output); written "
                                               "atomically, its folder is checked before the model is loaded; "
                                               "for a corpus, the output folder")
    parser.add_argument("--format", choices=tuple(FORMATS), default="text",
                        help="text: your text with marks inserted; iwslt: one 'word<TAB>LABEL' line per word "
                             "as you wrote it; json: each word with its label and the label probabilities")
    parser.add_argument("--keep-case", "--no-capitalise", "--no-capitalize", dest="capitalise",
                        action="store_false",
                        help="do not capitalise sentence starts and 'i' (text format); every word keeps its case")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (CUDA when there is a GPU; "
                                                        "default: cpu)")
    parser.add_argument("--threads", type=int, default=THREADS,
                        help=f"torch's CPU threads (default {THREADS}; the labels are the same whatever the count)")
    corpus = parser.add_argument_group("a corpus (several inputs or a folder)")
    corpus.add_argument("--workers", type=int, default=None,
                        help="local worker processes, each loading the model once (default: 1, this process)")
    corpus.add_argument("--dask", metavar="ADDRESS", default=None,
                        help="address of a Dask distributed scheduler (e.g. tcp://10.0.0.5:8786) to run on instead; "
                             "its workers must see the same paths")
    corpus.add_argument("--task-words", type=int, default=TASK_WORDS,
                        help=f"words per task: the transcripts a worker punctuates together (default {TASK_WORDS:,})")
    corpus.add_argument("--share-batches", action="store_true",
                        help="fill the model's batches with the windows of several transcripts: faster on a GPU, but "
                             "a model's arithmetic (an LSTM's) may then differ in the last bits from a single-file "
                             "run, and so the probabilities of --format json (marks only at a near-tie)")
    corpus.add_argument("--report", help="also write the run's report here (JSON, transcripts sorted by name)")
    corpus.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


#: torch's CPU threads by default: the evaluate stage's (params.yaml evaluate.threads), fixed whatever the machine
THREADS = 2

#: Words a task holds by default: enough texts to fill the model's batches, few enough to lose little when stopped.
TASK_WORDS = 10_000


def _is_corpus(args: argparse.Namespace) -> bool:
    return (len(args.input) > 1 or any(Path(given).is_dir() for given in args.input)
            or args.timings_dir is not None or args.workers is not None or args.dask is not None
            or args.report is not None or args.share_batches)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    if _is_corpus(args):
        return corpus_main(parser, args)
    if args.timings_format and not args.alignment:
        parser.error("--timings-format goes with --alignment or --timings-dir")

    def fail(error: Exception) -> int:
        print(f"punctuate: error: {error}", file=sys.stderr)
        return 2

    source = args.input[0] if args.input else None
    try:
        name, text = read_text(source)
        check_output(args.output)
        model = Path(args.model) if args.model else default_model(args.params, bool(args.alignment or args.audio))
    except (InputError, OutputError, ModelChoiceError) as error:
        return fail(error)

    timings = None
    if args.alignment or args.audio:
        from corpus.user_text import split_user_text
        from inference.speech_input import TimingsFormatError, TimingsMismatchError, match_timings

        try:
            timings = _read_alignment(args.alignment, args.timings_format, source) if args.alignment \
                else _align(args.audio, text)
            match_timings(split_user_text(text), timings, transcript=name)  # checked before the model loads
        except (InputError, TimingsFormatError, TimingsMismatchError) as error:
            return fail(error)

    from inference.device import DeviceUnavailable  # torch and the model code: only now
    from inference.punctuator import Punctuator

    _set_threads(args.threads)
    try:
        punctuator = Punctuator(model, device=args.device)
    except (DeviceUnavailable, FileNotFoundError, ValueError) as error:
        return fail(error)
    if timings is not None and not punctuator.reads_timings:
        print(f"punctuate: note: {model} reads no speech; the word timings were checked but not used",
              file=sys.stderr)
    prepared = punctuator.prepare_text(text, timings=timings, transcript=name)
    result = punctuator.punctuate_prepared([prepared], capitalise=args.capitalise,
                                           probabilities=args.format == "json")[0]
    try:
        write_output(args.output, format_punctuated(result, args.format))
    except OutputError as error:
        return fail(error)
    return 0


def corpus_main(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``punctuate INPUT... -o OUT_DIR``: a corpus (:func:`inference.batch.punctuate_batch`)."""
    if not args.output or args.output == "-":
        parser.error("a corpus (several inputs, a folder, --timings-dir, --workers or --dask) needs -o OUT_DIR")
    if not args.input or "-" in args.input:
        parser.error("a corpus is read from files and folders, not standard input")
    if args.alignment or args.audio:
        parser.error("--alignment and --audio are for one transcript; a corpus takes --timings-dir")
    if args.timings_format and not args.timings_dir:
        parser.error("--timings-format goes with --alignment or --timings-dir")
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.task_words < 1:
        parser.error("--task-words must be at least 1")
    if Path(args.output).exists() and not Path(args.output).is_dir():
        print(f"punctuate: error: {args.output}: not a folder (a corpus is written into a folder)", file=sys.stderr)
        return 2
    from executor import SchedulerUnavailable
    from inference.batch import ModelUnavailable, punctuate_batch

    _set_threads(args.threads)  # this process's; local worker processes share the cores (inference/batch.py)
    try:
        model = Path(args.model) if args.model else default_model(args.params, args.timings_dir is not None)
        report = punctuate_batch(args.input, args.output, model=model, output_format=args.format,
                                 capitalise=args.capitalise, timings_dir=args.timings_dir,
                                 timings_format=args.timings_format, device=args.device, workers=args.workers or 1,
                                 scheduler=args.dask, task_words=args.task_words, batch_size=64,
                                 share_batches=args.share_batches, progress=not args.quiet)
    except (ModelChoiceError, ModelUnavailable, SchedulerUnavailable, OSError, ValueError) as error:
        print(f"punctuate: error: {error}", file=sys.stderr)
        return 2
    for result in report.failed:
        print(f"punctuate: failed: {result.error}", file=sys.stderr)
    print(f"punctuate: {report.summary()}", file=sys.stderr)
    if args.report:
        import json

        content = {**report.to_dict(), "threads": args.threads, "numerics": numeric_facts()}
        atomic_write_text(args.report, json.dumps(content, indent=1, ensure_ascii=False) + "\n")
    return report.exit_status()


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _read_alignment(path: str, timings_format: str | None, transcript: str | None):
    """The timing rows of ``--alignment`` (a CTM's utterance named as the transcript's file, or its only one)."""
    from inference.speech_input import TimingsSource, ctm_source, read_timings, timings_format as format_of

    kind = format_of(path, timings_format)
    stem = Path(transcript).stem if transcript not in (None, "-") else None
    source = ctm_source(path, stem) if kind == "ctm" else TimingsSource(path, kind)
    return read_timings(source)


def _align(audio: str, text: str):
    """Word timings of ``text`` in the recording ``audio``, one per model token (pocketsphinx)."""
    from corpus.user_text import model_tokens, split_user_text
    from inference.speech_input import TimingRows

    if not Path(audio).is_file():
        raise InputError(f"{audio}: no such file")
    tokens = model_tokens(split_user_text(text))
    if not tokens:
        raise InputError("the transcript has no words to align")
    from aligner import AlignmentError, align  # pocketsphinx: only now

    try:
        timings = align(audio, tokens)
    except AlignmentError as error:
        raise InputError(f"{audio}: {error}") from error
    return TimingRows(tuple(timings), audio)


if __name__ == "__main__":
    raise SystemExit(main())
