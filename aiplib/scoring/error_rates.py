"""Error rates of normalised text: word (WER) and character (CER) errors, both from jiwer [1]_.

The per-row WER of the score files is :func:`aiplib.core.textnorm.score_asr_row`; this module holds
what is pooled over utterances: the corpus WER and CER of :func:`aiplib.scoring.score.wer_details`
and the per-utterance character counts of the condition tables
(:mod:`aiplib.analysis.conditions.table`).

References
----------
.. [1] jiwer, https://github.com/jitsi/jiwer (``process_words``, ``process_characters``, ``cer``).
"""

from __future__ import annotations

import functools

import numpy as np


def pooled_wer(errors: int, ref_words: int) -> float:
    """Corpus WER ``Σ(S + D + I) / Σ N`` from summed counts (NaN when ``ref_words`` is 0).

    >>> pooled_wer(3, 12)
    0.25
    """
    if not ref_words:
        return float("nan")
    return errors / ref_words


def corpus_cer(ref_norm, hyp_norm) -> float:
    """``jiwer.cer`` over the utterances whose normalised reference is not empty (NaN if none).

    ``ref_norm, hyp_norm``: sequences of str of one length (n_utterances,). Spaces count as
    characters.

    >>> corpus_cer(["abc", ""], ["abd", "x"])
    0.3333333333333333
    """
    import jiwer

    refs = []
    hyps = []
    for ref, hyp in zip(ref_norm, hyp_norm):
        if ref:
            refs.append(ref)
            hyps.append(hyp)
    if not refs:
        return float("nan")
    return float(jiwer.cer(refs, hyps))


@functools.cache
def _char_errors(ref: str, hyp: str) -> tuple[int, int]:
    """``(S + D + I, H + S + D)`` of one pair of normalised strings; an empty reference gives
    ``(len(hyp), 0)``."""
    import jiwer

    if not ref:
        return len(hyp), 0
    out = jiwer.process_characters(ref, hyp)
    errors = out.substitutions + out.deletions + out.insertions
    n_chars = out.hits + out.substitutions + out.deletions
    return errors, n_chars


def char_counts(ref_norm, hyp_norm) -> tuple[np.ndarray, np.ndarray]:
    """Per-utterance character errors and reference characters (jiwer [1]_).

    Parameters
    ----------
    ref_norm, hyp_norm : sequence of str [shape=(n,)]
        Normalised references (non-empty) and hypotheses.

    Returns
    -------
    errors, n_chars : np.ndarray of int [shape=(n,)]
        ``S + D + I`` and ``H + S + D`` of ``jiwer.process_characters`` (spaces count as
        characters, as in ``jiwer.cer``), so ``errors.sum() / n_chars.sum()`` is the corpus CER
        that :func:`corpus_cer` reports.
    """
    pairs = [_char_errors(ref, hyp) for ref, hyp in zip(ref_norm, hyp_norm)]
    counts = np.array(pairs, dtype=np.int64).reshape(-1, 2).T
    return counts[0], counts[1]
