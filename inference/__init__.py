"""Punctuating text with a trained model directory: the ``punctuate`` command and the one decoding path.

* :mod:`inference.model_dir` loads a model directory (errors name the damaged file);
* :mod:`inference.device` picks the torch device (a missing GPU is named, not reported as a damaged file);
* :mod:`inference.windows` cuts a token stream into overlapping windows and stitches the labels back;
* :mod:`inference.speech_input` checks word timings against the transcript and turns them into timing cues;
* :mod:`inference.punctuator` (:class:`Punctuator`) keeps the user's words and labels them; the evaluate stage
  decodes through it too, so the F1 recorded for a model is what ``punctuate`` gives;
* :mod:`inference.cli` is ``punctuate``.

Importing this package imports nothing heavy: ``punctuate --help`` does not load torch.
"""
