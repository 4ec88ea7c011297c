"""Real speech: the real TED talks with word timings (``../shared/data/ted_real``), the pause model fitted on
them and the timing cues simulated for the training text (:mod:`realspeech.cues`), and models scored on the
real talks exactly as ``punctuate`` runs them, against the label-free control (:mod:`realspeech.evaluate`)."""
