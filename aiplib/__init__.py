"""aiplib — helpers of the AIP-Speech research compendium.

Audits how real background sound degrades speech recognisers and Speech LLMs. One package per
stage group, imports flowing one way (``docs/ARCHITECTURE.md``): core → io → sources → battery →
stimuli → inference → scoring → analysis → explore. Heavy dependencies (torch, faster-whisper,
transformers) are imported by the functions that need them, so ``import aiplib`` is cheap.
"""

from aiplib.core import DEFAULT_SEED, __version__  # noqa: F401
from aiplib.core.errors import (  # noqa: F401
    AiplibError,
    AiplibParameterError,
    AudioFileError,
    MissingPackageError,
    ModelUnavailableError,
    ValidationError,
)
from aiplib.core.params import check_parameters  # noqa: F401
from aiplib.core.workspace import Workspace, smoke, workspace  # noqa: F401
