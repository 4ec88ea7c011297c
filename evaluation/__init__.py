"""Scoring: the IWSLT2011 scorer (:mod:`evaluation.scoring`: per-class and micro-averaged P/R/F1 over
COMMA/PERIOD/QUESTION, SER) and a trained model scored on the benchmark's test sets through the same decoding
path as ``punctuate`` (:mod:`evaluation.benchmark`)."""
