"""Recognisers: the registry (``registry.yaml``), the Recogniser interface and the backends.

Importing this package is cheap: backends (faster-whisper, transformers …) load on first use.
"""
from aiplib.inference.models.base import Recogniser
from aiplib.inference.models.registry import (
    BACKEND_MODULES,
    BACKENDS,
    DEFAULT_MODEL,
    ModelEntry,
    check_runnable,
    cuda_available,
    decoding_key,
    get_entry,
    list_models,
    load_model,
    load_registry,
    resolve,
)

__all__ = ["Recogniser", "ModelEntry", "BACKENDS", "BACKEND_MODULES", "DEFAULT_MODEL",
           "load_registry", "get_entry", "list_models", "resolve", "check_runnable",
           "cuda_available", "load_model", "decoding_key"]
