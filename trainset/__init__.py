"""The training set: the IWSLT2011 evaluation splits read as distributed and an equivalent of the benchmark's
training set rebuilt from the TED transcripts, every evaluation or real-speech talk kept out of it
(:func:`trainset.prepare.prepare_data`), and its report (:mod:`trainset.report`)."""
