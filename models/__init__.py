"""Punctuation models.

Importing this package imports every module in it, so each model registers itself with
:func:`models.registry.register_model`: a new model is one file with a decorated class.
"""

import importlib
import pkgutil

from models.registry import MODEL_REGISTRY, PunctuationModel, build_model, register_model

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["MODEL_REGISTRY", "PunctuationModel", "build_model", "register_model"]
