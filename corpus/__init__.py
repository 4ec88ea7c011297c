"""The bottom layer: data formats that every other package shares. It imports nothing else of ours.

* :mod:`corpus.labels` -- the benchmark's label set and ids;
* :mod:`corpus.iwslt` -- IWSLT2011 token files (``word<TAB>LABEL``), read as distributed;
* :mod:`corpus.text` -- normalisation of punctuated transcripts into benchmark tokens and labels;
* :mod:`corpus.user_text` -- a user's text split into words kept byte for byte, and read as benchmark tokens;
* :mod:`corpus.talks` -- the benchmark splits cut into talks (XML sources, training talks, dev pseudo-talks);
* :mod:`corpus.talks_table` -- the talks table the audio stages share (``talks.tsv``);
* :mod:`corpus.frames` -- the ragged per-token MFCC frame store;
* :mod:`corpus.timings` -- word timings (one ``WordTiming``) and their TSV / Parquet formats;
* :mod:`corpus.anchors` -- a talk's tokens cut into chunks with their audio spans (aligning long talks in pieces);
* :mod:`corpus.tedlium` -- TED-LIUM's layout and STM segments, its talks matched to the TED transcripts by name;
* :mod:`corpus.io` -- the atomic-write helper every writer uses.

The layering (docs/architecture.md, checked by tests/test_layering.py)::

    corpus  <-  aligner, embeddings, models  <-  audio  <-  punctuation  <-  pipeline
"""
