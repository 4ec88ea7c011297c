"""A tiny TED-LIUM (release 3 layout) made in the test: flite speech saved as NIST SPHERE through soundfile, and STM
files with one segment per sentence at the engine's own word times, written the way TED-LIUM writes them (lower
case, no marks, ``don 't``, a ``{NOISE}`` and an ``<unk>``, the gaps as ``ignore_time_segment_in_scoring``).

Also the punctuated transcripts the recordings are matched to: TED-transcript names (speaker first or last) and
an IWSLT-style Ref talk whose XML ``<title>`` names its speaker."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np

from corpus.iwslt import write_iwslt
from corpus.text import normalize_transcript
from tests.fixture_corpus import write_train_talks

#: TED transcripts (name -> punctuated text) with a recording each, and one without.
TRANSCRIPTS = {
    "Averting_the_climate_crisis_Al_Gore": (
        "Thank you so much, Chris. It's truly a great honor to have the opportunity to come to this stage twice. "
        "I'm extremely grateful. I have been blown away by this conference, and I want to thank all of you."),
    "Amy_Smith_Simple_designs_that_could_save_millions_of_childrens'_lives": (
        "Two million people die every year from breathing the smoke of cooking fires. Most of them are children. "
        "We don't need a big machine to fix that. We need simple designs that people can build."),
    "Hans_Rosling_The_best_stats_you've_ever_seen": (
        "About ten years ago, I took on the task to teach global development to Swedish undergraduate students."),
}
#: An IWSLT Ref talk (docid -> (title, text)), matched by the speaker in its title.
REF_TALKS = {"1175": ("Daniel Tammet: Different ways of knowing",
                      "I'm a savant, or more precisely, a high-functioning autistic savant. It's a rare condition. "
                      "And rarer still when accompanied by a mastery of language.")}
DEV_TEXT = "We went home early. The night was cold and dark. Nobody said a word. Then it rained."
#: TED-LIUM recordings: id -> what is said in it (a transcript's text, or another text).
RECORDINGS = {
    "AlGore_2006": TRANSCRIPTS["Averting_the_climate_crisis_Al_Gore"],
    "AmySmith_2006": TRANSCRIPTS["Amy_Smith_Simple_designs_that_could_save_millions_of_childrens'_lives"],
    "DanielTammet_2011": REF_TALKS["1175"][1],
    # the same speaker as AlGore_2006, another talk: its name matches, its text does not
    "AlGore_2008": "The climate crisis is getting worse. We have to act now, and we can solve it together.",
    # nobody of that name gave a talk of the transcripts
    "NobodyKnown_2010": "Nothing of what I say here was ever written down in any transcript at all.",
}


def tedlium_words(tokens: list[str]) -> list[str]:
    """Benchmark tokens the way TED-LIUM writes them: ``do n't`` -> ``don 't``, ``it 's`` stays."""
    words: list[str] = []
    for token in tokens:
        if token == "n't" and words:
            words[-1] += "n"
            words.append("'t")
        else:
            words.append(token)
    return words


def write_tedlium(root: Path, recordings: dict[str, str] = RECORDINGS, *, voice: str = "kal16") -> dict[str, object]:
    """``root/data/{sph,stm}`` for ``recordings``; returns id -> the :class:`audio.reference_speech.Reference`
    of its speech (word times of the engine)."""
    import soundfile

    from audio.reference_speech import synthesize

    sph_dir, stm_dir, scratch = root / "data" / "sph", root / "data" / "stm", root / "scratch"
    for folder in (sph_dir, stm_dir, scratch):
        folder.mkdir(parents=True, exist_ok=True)
    references = {}
    for number, (talk, text) in enumerate(recordings.items()):
        reference = synthesize(text, scratch / f"{talk}.wav", voice=voice)
        samples, rate = soundfile.read(str(scratch / f"{talk}.wav"), dtype="int16")
        soundfile.write(str(sph_dir / f"{talk}.sph"), samples, rate, format="NIST", subtype="PCM_16")
        _, labels = normalize_transcript(text)
        lines = [";; TED-LIUM style STM written by tests/fixture_tedlium.py"]
        start_index = 0
        previous_end = 0.0
        for index, label in enumerate(labels):
            if label not in ("PERIOD", "QUESTION") and index < len(labels) - 1:
                continue
            timed = [t for t in reference.timings[start_index : index + 1] if t.has_time]
            begin = max(0.0, timed[0].start - 0.05)
            end = min(reference.duration, timed[-1].end + 0.05)
            if begin - previous_end > 0.02:
                lines.append(f"{talk} 1 inter_segment_gap {previous_end:.2f} {begin:.2f} <o,,unknown> "
                             "ignore_time_segment_in_scoring")
            words = tedlium_words(reference.words[start_index : index + 1])
            if start_index == 0:
                words = ["{NOISE}"] + words
            if number % 2 == 0 and len(words) > 4:
                words[3] = "<unk>"
            lines.append(f"{talk} 1 {talk} {begin:.2f} {end:.2f} <o,f0,male> {' '.join(words)}")
            start_index, previous_end = index + 1, end
        (stm_dir / f"{talk}.stm").write_text("\n".join(lines) + "\n", encoding="utf-8")
        references[talk] = reference
    return references


XML = ('<?xml version="1.0" encoding="UTF-8"?>\n<mteval><srcset setid="x" srclang="english">\n{docs}\n'
       '</srcset></mteval>\n')
SOURCES = {"ref": "ref.xml", "asr": "asr.xml"}


def _xml(docs: dict[str, tuple[str, str]]) -> str:
    body = "\n".join(f'<doc docid="{docid}" genre="lectures">\n<title>{title}</title>\n<seg id="1"> {text} </seg>\n'
                     f'</doc>' for docid, (title, text) in docs.items())
    return XML.format(docs=body)


def write_iwslt_sources(iwslt: Path) -> None:
    """The Ref/ASR XML sources (with titles) and the benchmark files made from them, and a dev2012."""
    iwslt.mkdir(parents=True, exist_ok=True)
    (iwslt / SOURCES["ref"]).write_text(_xml(REF_TALKS), encoding="utf-8")
    (iwslt / SOURCES["asr"]).write_text(_xml(REF_TALKS), encoding="utf-8")
    for name, text in (("test2011", " ".join(t for _, t in REF_TALKS.values())),
                       ("test2011asr", " ".join(t for _, t in REF_TALKS.values())), ("dev2012", DEV_TEXT)):
        write_iwslt(iwslt / name, *normalize_transcript(text))


def write_prepared(prepared: Path, iwslt: Path) -> Path:
    """A prepared folder as the prepare stage writes it: ref/asr/dev from ``iwslt``, train from
    :data:`TRANSCRIPTS` (talks named as in the TED transcripts)."""
    write_iwslt_sources(iwslt)
    prepared.mkdir(parents=True, exist_ok=True)
    for split, name in (("ref", "test2011"), ("asr", "test2011asr"), ("dev", "dev2012")):
        (prepared / f"{split}.tsv").write_bytes((iwslt / name).read_bytes())
    write_train_talks(prepared, TRANSCRIPTS)
    return prepared


def write_ted_talks(path: Path) -> Path:
    """The TED transcripts file (``{"talk", "text"}`` per line, gzip) holding :data:`TRANSCRIPTS`."""
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for talk, text in TRANSCRIPTS.items():
            handle.write(json.dumps({"talk": talk, "text": text}) + "\n")
    return path


def boundary_errors_ms(reference, timings) -> np.ndarray:  # noqa: ANN001
    """|aligned - engine| of both boundaries of every word placed, in ms."""
    errors = []
    for ref, hyp in zip(reference.timings, timings):
        if ref.has_time and hyp.aligned and math.isfinite(hyp.start):
            errors += [abs(hyp.start - ref.start), abs(hyp.end - ref.end)]
    return np.asarray(errors) * 1000
