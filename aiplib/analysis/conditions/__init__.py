"""Per-condition results with uncertainty: error rates, paired change against clean, verdict.

A *condition* is one (model, task, background, SNR) cell of the audit. For every condition, and
for the aggregates over backgrounds (per SNR), over SNRs (per background) and over both
(overall), :func:`condition_table` reports

* ASR: corpus WER = Σ(S + D + I) / Σ N and the mean of the per-utterance WERs (both, because a
  few short utterances with many insertions move the mean far more than the corpus value); the
  corpus CER; the substitution, deletion and insertion shares of the reference words
  (``sub_pp + del_pp + ins_pp == wer_pp``; insertions measure how much of a background voice
  ends up in the transcript). Alignments come from jiwer [1]_ on the normalised text of
  ``results/scores/<task>.csv``.
* KWS: accuracy of the closed-set first-word rule.
* The paired change against the *clean* version of the same items — ΔWER = WER(noisy) −
  WER(clean), ΔAcc = acc(clean) − acc(noisy), so positive always means "noise hurt" — with a
  percentile bootstrap interval [2]_ resampling items, an exact test (the sign test on the
  per-item changes, ``scipy.stats.binomtest``; for KWS conditions with one pair per item the
  exact McNemar test [3]_, which is the same binomial test on the discordant pairs), and a
  verdict (:func:`verdict`).

Aggregated scopes hold several pairs per item (one per background and/or SNR). The bootstrap
then resamples whole items (a cluster bootstrap: an item's pairs stay together) and the exact
test is the sign test on each item's mean change, so that the tested units are independent.

Everything is in percent / percentage points (columns ending ``_pp``); the score files hold
fractions.

References
----------
.. [1] jiwer, https://github.com/jitsi/jiwer (``process_words``, ``process_characters``).
.. [2] B. Efron, R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall, 1993,
       §13.3 (percentile interval) and §8.5 / Davison & Hinkley 1997 §3.8 (resampling clusters).
.. [3] Q. McNemar, "Note on the sampling error of the difference between correlated proportions
       or percentages", Psychometrika 12(2), 153–157, 1947.
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
    char_counts,
    condition_label,
    paired_change,
    verdict,
)

__all__ = ["SCOPES", "VERDICTS", "DEFAULT_MIN_DIFF_PP", "ALPHA", "MIN_ITEMS_FOR_VERDICT", "COARSE_BELOW_ITEMS", "ALL",
           "ASR_ROBUST_COLUMNS", "KWS_ROBUST_COLUMNS", "verdict", "paired_change", "char_counts", "condition_label",
           "condition_table", "condition_tables", "asr_robust", "kws_robust", "write_condition_tables",
           "read_condition_tables", "inactive_background_rows", "write_active_only_tables"]
