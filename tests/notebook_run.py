"""Execute one notebook with papermill as `make NN` does, under temporary environment variables.

Used by ``tests/test_notebook_checks.py``, ``tests/test_report.py`` and
``tests/test_fieldkit_pipeline.py``."""
import os
from pathlib import Path
from unittest import mock

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def run_notebook(stage: str, out: Path, *, parameters: dict, env: dict, **kw) -> Path:
    """Execute ``notebooks/<stage>.ipynb`` into ``out`` with ``parameters`` and ``env`` set only
    for the run (restored after, as before); extra papermill options in ``kw``. Returns ``out``."""
    import papermill as pm

    out.parent.mkdir(parents=True, exist_ok=True)
    with mock.patch.dict(os.environ, env):
        pm.execute_notebook(str(NOTEBOOKS / f"{stage}.ipynb"), str(out), parameters=parameters,
                            cwd=str(NOTEBOOKS), progress_bar=False, log_output=False, **kw)
    return out
