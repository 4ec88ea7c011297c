"""Importing the model, embedding and corpus layers (and the training loop) pulls in no heavy optional library.

``punctuate`` and every pipeline stage import these; matplotlib (figures), pandas, transformers (FF2/FFA's
pretrained stream, when such a model is built), gensim (loading a vector file) and scipy (embedding evaluation)
are imported only where they are used. (How long the imports take is measured in ``benchmarks/speed.py``, not
asserted here.)
"""

from __future__ import annotations

from tests.helpers import imported_after

HEAVY = ("matplotlib", "pandas", "transformers", "gensim", "scipy")


def test_the_lower_layers_and_the_training_loop_import_no_heavy_library():
    assert imported_after("import models, embeddings, corpus, training", HEAVY) == []


def test_inference_imports_no_heavy_library_before_it_reads_a_model():
    assert imported_after("import inference.punctuator", HEAVY) == []
