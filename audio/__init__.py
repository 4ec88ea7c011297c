"""Speech for the punctuation benchmark: talk segmentation, synthetic speech with engine word timings,
per-token prosodic features and MFCC frames.

* :mod:`audio.talks` -- cut the benchmark splits into talks (test2011/test2011asr from their XML sources,
  train from ``train_talks.tsv``, dev2012 into pseudo-talks).
* :mod:`audio.synthesis` -- read each talk aloud with flite or espeak-ng (punctuated or control
  condition), keeping the engine's own word timings; or plug in real recordings.
* :mod:`audio.features` -- pauses, durations, f0 and energy per token with a missing-value mask, and a
  ragged MFCC store for a later speech-embedding stage.
* :mod:`audio.stage` -- the pipeline stages as library functions: talk audio for the splits
  (:func:`~audio.stage.make_talk_audio`), forced alignment with ASR timing inheritance
  (:func:`~audio.stage.align_talks`), per-token feature arrays over whole splits
  (:func:`~audio.stage.token_features`); wrapped by ``pipeline/{synthesize,align,features}.py``.

Needs ``soundfile`` and ``librosa`` (pip) and the Debian packages ``flite`` and ``espeak-ng`` for synthesis.
"""
