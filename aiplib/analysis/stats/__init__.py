"""Statistics for the audit: every number with its uncertainty.

Pure functions (no file I/O) used by :mod:`aiplib.analysis.figures` and :mod:`aiplib.analysis.report`:
Spearman rank correlation [1]_, percentile bootstrap intervals [2]_, the exact sign test,
McNemar's exact test [3]_, Benjamini–Hochberg adjustment [4]_, the Residual Effect Ratio of the
steering prompt, and the per-background degradation / descriptor correlation tables.

Conventions: *degradation* is positive when noise hurts —
``delta_wer = WER(noisy) − WER(clean)`` for ASR and ``delta_acc = acc(clean) − acc(noisy)`` for KWS (both as fractions, not %).
Randomness comes only from ``numpy.random.default_rng(seed)``; every result records its
``seed`` and ``n_resamples``.

References
----------
.. [1] C. Spearman, "The proof and measurement of association between two things",
       American Journal of Psychology 15(1), 72–101, 1904.
.. [2] B. Efron, "Bootstrap methods: another look at the jackknife", Annals of Statistics 7(1),
       1–26, 1979; B. Efron, R. J. Tibshirani, *An Introduction to the Bootstrap*, 1993 (§13,
       percentile interval).
.. [3] Q. McNemar, "Note on the sampling error of the difference between correlated proportions
       or percentages", Psychometrika 12(2), 153–157, 1947.
.. [4] Y. Benjamini, Y. Hochberg, "Controlling the false discovery rate: a practical and
       powerful approach to multiple testing", JRSS B 57(1), 289–300, 1995.
"""
from aiplib.analysis.stats.core import (
    MIN_N_FOR_INTERVAL,
    MIN_USABLE_SHARE,
    SPEARMAN_EXACT_MAX_N,
    SPEARMAN_PERMUTATION_MAX_N,
    SPEARMAN_N_PERMUTATIONS,
    RER_DENOMINATOR_EPS,
    RER_KWS_SMALL,
    RER_FLAG_BELOW,
    SpearmanResult,
    BootstrapResult,
    BinomTestResult,
)
from aiplib.analysis.stats.spearman import spearman, spearman_permutation_p  # noqa: F401
from aiplib.analysis.stats.intervals import bootstrap_ci  # noqa: F401
from aiplib.analysis.stats.exact_tests import sign_test, mcnemar_exact, bh_adjust  # noqa: F401
from aiplib.analysis.stats.degradation import (
    rer,
    rer_flag,
    degradation_by_background,
    partial_note,
    descriptor_correlations,
    WORST_STIMULI_COLUMNS,
    worst_stimuli,
    DEGRADATION_METHODS,
)
from aiplib.analysis.stats.authors import (
    AUTHORS_DESCRIPTOR_DECIMALS,
    TOP_RANK_DECIMALS,
    round_descriptors,
    rank_by_mean_abs_rs,
    unpaired_delta,
    unpaired_item_sums,
    delta_from_sums,
)
