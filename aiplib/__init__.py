"""aiplib — helpers of the AIP-Speech research compendium.

Audits how real background sound degrades speech recognisers and Speech LLMs. All logic of the
notebooks lives here; see ``docs/ARCHITECTURE.md`` for the module map and file formats.
Heavy dependencies (torch, faster-whisper, transformers) are imported lazily by the modules that
need them, so ``import aiplib`` is cheap.
"""
__version__ = "0.1.0"

from .errors import (  # noqa: F401
    AiplibError,
    AiplibParameterError,
    AudioFileError,
    MissingPackageError,
    ModelUnavailableError,
    ValidationError,
)
from .workspace import Workspace, workspace, smoke  # noqa: F401
from .params import check_parameters  # noqa: F401
