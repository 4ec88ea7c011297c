"""``punctuate``: restore punctuation in a transcript with a trained model directory.

    punctuate --model artifacts/model transcript.txt -o transcript.punct.txt
    cat transcript.txt | punctuate --model artifacts/model --format iwslt
    punctuate --alignment talk.words.tsv talk.txt          # with the words' times (speech model)
    punctuate --audio talk.wav talk.txt                    # aligns the transcript to the recording first

Models: without --model, the model directories named in params.yaml (section ``punctuate``: ``text_model``,
or ``audio_model`` when speech is given), relative to that file; the params file is --params, else
./params.yaml, else the one of the repository this command comes from.

Speech: --alignment takes word timings as the aligner writes them (``word<TAB>start<TAB>end``, a header
line optional, both time cells empty for a word without a time, the transcript's words in order: one row per
word, or per benchmark token as ``python -m aligner`` writes them); --audio runs the aligner (pocketsphinx) on
the recording first. A model trained with timing cues reads the pause after each word and how long it was
held; without speech the same model punctuates from the text alone. Timings whose words are not the
transcript's, or whose times are not numbers, negative or out of order, are an error naming the file and line.

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
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

# Only light modules at import time: `punctuate --help` must not load torch; the model code is imported
# once the arguments, the input and the output folder have been checked.
from corpus.io import atomic_write_text


class InputError(Exception):
    """Input that cannot be read as text; the message names the input."""


class OutputError(Exception):
    """An output path that cannot be written; the message names the path."""


class ModelChoiceError(Exception):
    """No --model and no usable ``punctuate`` section in the params file; the message says what is missing."""


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
    try:
        return name, data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise InputError(f"{name}:{line}: not UTF-8 text (byte offset {error.start})") from error


def check_output(destination: str | None) -> None:
    """Make sure ``destination`` can be written *before* any work is done; OutputError names the path.

    The nearest existing folder on the way to the file is probed by creating (and removing) a uniquely named
    file in it, which is what the final atomic write will do.
    """
    if destination in (None, "-"):
        return
    path = Path(destination)
    if path.is_dir():
        raise OutputError(f"{path}: is a directory, not a file")
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
    parser.add_argument("input", nargs="?", help="text file to punctuate (default: standard input)")
    parser.add_argument("--model", help="trained model directory (default: punctuate.text_model of params.yaml, "
                                        "or punctuate.audio_model with --alignment/--audio)")
    parser.add_argument("--params", help="params file naming the default models (default: ./params.yaml, else "
                                         "the repository's)")
    speech = parser.add_mutually_exclusive_group()
    speech.add_argument("--alignment", metavar="WORDS_TSV",
                        help="the transcript's word timings (word<TAB>start<TAB>end, seconds; empty cells for a "
                             "word without a time)")
    speech.add_argument("--audio", metavar="AUDIO",
                        help="a recording of the transcript (WAV/FLAC/...): aligned with pocketsphinx first")
    parser.add_argument("-o", "--output", help="where to write the result (default: standard output); written "
                                               "atomically, its folder is checked before the model is loaded")
    parser.add_argument("--format", choices=("text", "iwslt"), default="text",
                        help="text: your text with marks inserted; iwslt: one 'word<TAB>LABEL' line per word "
                             "as you wrote it")
    parser.add_argument("--keep-case", "--no-capitalise", "--no-capitalize", dest="capitalise",
                        action="store_false",
                        help="do not capitalise sentence starts and 'i' (text format); every word keeps its case")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (CUDA when there is a GPU; "
                                                        "default: cpu)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def fail(error: Exception) -> int:
        print(f"punctuate: error: {error}", file=sys.stderr)
        return 2

    try:
        name, text = read_text(args.input)
        check_output(args.output)
        model = Path(args.model) if args.model else default_model(args.params, bool(args.alignment or args.audio))
    except (InputError, OutputError, ModelChoiceError) as error:
        return fail(error)

    timings = None
    if args.alignment or args.audio:
        from corpus.user_text import split_user_text
        from inference.speech_input import TimingsFormatError, TimingsMismatchError, match_timings

        try:
            timings = _read_alignment(args.alignment) if args.alignment else _align(args.audio, text)
            match_timings(split_user_text(text), timings, transcript=name)  # checked before the model loads
        except (InputError, TimingsFormatError, TimingsMismatchError) as error:
            return fail(error)

    from inference.device import DeviceUnavailable  # torch and the model code: only now
    from inference.punctuator import Punctuator

    try:
        punctuator = Punctuator(model, device=args.device)
    except (DeviceUnavailable, FileNotFoundError, ValueError) as error:
        return fail(error)
    if timings is not None and not punctuator.reads_timings:
        print(f"punctuate: note: {model} reads no speech; the word timings were checked but not used",
              file=sys.stderr)
    user_text, labels, rendered = punctuator.punctuate_text(text, capitalise=args.capitalise, timings=timings,
                                                             transcript=name)
    if args.format == "iwslt":
        content = "".join(f"{word.text}\t{label}\n" for word, label in zip(user_text.words, labels))
    else:
        content = rendered
    try:
        write_output(args.output, content)
    except OutputError as error:
        return fail(error)
    return 0


def _read_alignment(path: str):
    from inference.speech_input import read_timing_rows

    return read_timing_rows(path)


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
