"""Punctuating text with a trained model directory: the ``punctuate`` command and the one decoding path.

* :mod:`inference.model_dir` loads a model directory (errors name the damaged file);
* :mod:`inference.device` picks the torch device (a missing GPU is named, not reported as a damaged file);
* :mod:`inference.windows` cuts a token stream into overlapping windows and stitches the labels back;
* :mod:`inference.speech_input` reads word timings (TSV, CTM, JSON), checks them against the transcript and turns
  them into timing cues;
* :mod:`inference.punctuator` (:class:`Punctuator`) keeps the user's words and labels them (with the labels'
  probabilities when asked); the evaluate stage decodes through it too, so the F1 recorded for a model is what
  ``punctuate`` gives;
* :mod:`inference.outputs` writes a punctuated text in each format (text, iwslt, json);
* :mod:`inference.batch_inputs` finds a corpus's transcripts and pairs each with its word timings by name;
* :mod:`inference.batch` punctuates a corpus: resumable, through the project's executor (:mod:`executor`);
* :mod:`inference.cli` is ``punctuate``, for one transcript or a corpus.

Importing this package imports nothing heavy: ``punctuate --help`` does not load torch.
"""
