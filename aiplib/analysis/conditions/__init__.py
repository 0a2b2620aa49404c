"""Per-condition results with uncertainty: error rates, paired change against clean, verdict.

A *condition* is one (model, task, background, SNR) cell; :func:`condition_table` reports it and
its aggregates (per SNR, per background, overall):

* ASR: corpus WER = Σ(S + D + I) / Σ N and the mean per-utterance WER, the corpus CER, and the
  S / D / I shares of the reference words (they add up to the WER), from jiwer [1]_ alignments.
* KWS: accuracy of the closed-set first-word rule.
* The paired change against the clean version of the same items (ΔWER = WER(noisy) − WER(clean),
  ΔAcc = acc(clean) − acc(noisy): positive means worse) with a percentile bootstrap interval over
  items [2]_ (whole items resampled in aggregated scopes), an exact test (sign test on per-item
  changes; exact McNemar [3]_ for KWS with one pair per item) and a verdict (:func:`verdict`).
* The robust view beside the means (capped and median WER, loops; strict accuracy, non-answers;
  :func:`asr_robust`, :func:`kws_robust` for the paired changes of the family tables).

Values in percent / percentage points (columns ``_pp``); the score files hold fractions.

References
----------
.. [1] jiwer, https://github.com/jitsi/jiwer (``process_words``, ``process_characters``).
.. [2] B. Efron, R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall, 1993,
       §13.3 and §8.5 / Davison & Hinkley 1997 §3.8 (resampling clusters).
.. [3] Q. McNemar, Psychometrika 12(2), 153–157, 1947.
"""

from aiplib.analysis.conditions.files import (
    inactive_background_rows,
    read_condition_tables,
    write_active_only_tables,
    write_condition_tables,
)
from aiplib.analysis.conditions.table import (
    ASR_ROBUST_COLUMNS,
    KWS_ROBUST_COLUMNS,
    asr_robust,
    condition_table,
    condition_tables,
    kws_robust,
)
from aiplib.analysis.conditions.verdicts import (
    ALL,
    ALPHA,
    COARSE_BELOW_ITEMS,
    DEFAULT_MIN_DIFF_PP,
    MIN_ITEMS_FOR_VERDICT,
    SCOPES,
    VERDICTS,
    condition_label,
    paired_change,
    verdict,
)
from aiplib.scoring.error_rates import char_counts

__all__ = [
    "SCOPES",
    "VERDICTS",
    "DEFAULT_MIN_DIFF_PP",
    "ALPHA",
    "MIN_ITEMS_FOR_VERDICT",
    "COARSE_BELOW_ITEMS",
    "ALL",
    "ASR_ROBUST_COLUMNS",
    "KWS_ROBUST_COLUMNS",
    "verdict",
    "paired_change",
    "char_counts",
    "condition_label",
    "condition_table",
    "condition_tables",
    "asr_robust",
    "kws_robust",
    "write_condition_tables",
    "read_condition_tables",
    "inactive_background_rows",
    "write_active_only_tables",
]
