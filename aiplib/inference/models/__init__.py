"""Recognisers: the registry (``registry.yaml``), the Recogniser interface and the backends.

Importing this package is cheap: backends (faster-whisper, transformers …) load on first use.
"""

from aiplib.inference.models.base import Recogniser  # noqa: F401
from aiplib.inference.models.registry import (  # noqa: F401
    ModelEntry,
    cuda_available,
    decoding_key,
    get_entry,
    list_models,
    load_model,
    load_registry,
    resolve,
)
