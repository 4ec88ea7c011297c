"""Speech for the punctuation benchmark: synthetic speech with engine word timings, per-token prosodic
features and MFCC frames, and the three audio stages of the pipeline.

* :mod:`audio.synthesis` -- read each talk aloud (punctuated or control condition), keeping the engine's own
  word timings; over :mod:`audio.engines` (flite and espeak-ng through :mod:`ctypes`) and
  :mod:`audio.spoken` (what the engine is given per token; clitics, silent tokens, marks).
* :mod:`audio.real_audio` -- plug in real recordings instead.
* :mod:`audio.tedlium` -- or TED-LIUM's recordings, matched to the talks by name and text, with its STM segments
  as anchors for the alignment.
* :mod:`audio.reference_speech` -- a text spoken with reference word timings, for the aligner's tests and
  ``benchmarks/alignment.py``.
* :mod:`audio.features` -- pauses, durations, f0 and energy per token with a missing-value mask, and a
  ragged MFCC store (:mod:`corpus.frames`) for the speech-embedding stage.
* The pipeline stages as library functions, wrapped by ``pipeline/{synthesize,align,features}.py``: talk
  audio for the splits (:func:`audio.synthesize_stage.make_talk_audio`), forced alignment with ASR timing
  inheritance (:func:`audio.align_stage.align_talks`), per-token feature arrays over whole splits
  (:func:`audio.features_stage.token_features`); what they share is :mod:`audio.stage_common`, the
  Markdown report :mod:`audio.report`.

The talks themselves (cutting the splits into talks, the talks table) are :mod:`corpus.talks` and
:mod:`corpus.talks_table`. Needs ``soundfile`` and ``librosa`` (pip) and the Debian packages ``flite`` and
``espeak-ng`` for synthesis.
"""
