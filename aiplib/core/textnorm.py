"""Text rules of stage 8: normalisation, per-utterance WER, loops and the keyword-spotting rule.

Two normalisations are kept side by side, one meaning per column:

* **Headline (the paper's)** — :func:`normalize_text`: lower-cased, every ASCII punctuation
  character (:data:`string.punctuation`) replaced by a space, white space collapsed, as the
  authors' scoring (``scripts/06_score_metrics.py`` ``_normalize_asr_text`` and
  ``scripts/generate_results_new_2.py`` ``clean_txt`` of IvLabs/AIP-Speech). Per-utterance WER
  is jiwer's on these strings [2]_; a scoring failure counts 1.0 (``generate_results_new_2.py``).
* **Whisper-style** — :func:`normalize_whisper`: OpenAI's reference ``EnglishTextNormalizer`` [1]_
  from the ``openai-whisper`` package, with the one upstream fix merged after its last release
  (openai/whisper PR #2836; loaded without torch by :mod:`aiplib.core.textnorm_whisper`). Name and
  version: :data:`WHISPER_NORMALIZER_NAME`, :data:`WHISPER_NORMALIZER_VERSION`.

KWS follows the authors' rule (``_score_kws_row`` of ``06_score_metrics.py`` and ``is_correct``
of ``generate_results_new_2.py``), :data:`KWS_RULE`; beside it, :func:`kws_non_answer` marks
empty, refusal-like and multi-word answers.

References
----------
.. [1] A. Radford et al., "Robust speech recognition via large-scale weak supervision",
       arXiv:2212.04356, 2022; code: github.com/openai/whisper, ``whisper/normalizers``.
.. [2] jiwer, https://github.com/jitsi/jiwer (``process_words``).
"""
from __future__ import annotations

import importlib.metadata
import math
import re
import string

from aiplib.core.tasks import KEYWORDS
from aiplib.core.textnorm_whisper import (
    WHISPER_NORMALIZER_NAME,
    WHISPER_NORMALIZER_VERSION,
    english_normalizer,
)

__all__ = [
    "NORMALIZER_NAME", "NORMALIZER_VERSION", "NORMALIZER_RULE", "WHISPER_NORMALIZER_NAME",
    "WHISPER_NORMALIZER_VERSION", "JIWER_VERSION", "LOOP_LENGTH_RATIO", "LOOP_MAX_N", "LOOP_MIN_REPEATS",
    "KWS_EMPTY_WORD", "KWS_RULE", "NON_ANSWER_KINDS",
    "normalize_text", "normalize_whisper", "reference_is_empty", "align", "max_ngram_repeats", "loop_kind",
    "score_asr_row", "kws_first_word", "normalize_kws_label", "kws_correct", "kws_non_answer", "score_kws_row",
]

NORMALIZER_NAME = "aip-speech-paper"
"""Name of the headline normalisation (:func:`normalize_text`), as the authors' scoring."""

NORMALIZER_VERSION = "1"
"""Version of the headline rule in this package (bumped if the rule ever changes)."""

NORMALIZER_RULE = ("lower-case; each ASCII punctuation character (string.punctuation) -> space; "
                   "white space collapsed")
"""The headline normalisation in words (for sidecars and the report)."""

JIWER_VERSION = importlib.metadata.version("jiwer")
"""Installed version of jiwer."""

LOOP_LENGTH_RATIO = 3
"""A hypothesis with at least this many times the reference's words is a loop."""

LOOP_MAX_N = 4
"""Longest n-gram (words) searched for back-to-back repeats."""

LOOP_MIN_REPEATS = 4
"""An n-gram repeated this many times in a row (and more often than in the reference) is a loop."""

KWS_EMPTY_WORD = "silence"
"""What an empty KWS response reads as (the authors' rule)."""

KWS_RULE = ("first white-space token of the lower-cased, stripped response, stripped of ASCII "
            "punctuation at both ends ('silence' for an empty response); target clip: equals "
            "the label (normalised the same way); non-target clip: is none of the keywords")
"""The headline KWS rule in words."""

NON_ANSWER_KINDS = ("empty", "refusal", "multi_word")
"""Values of ``non_answer_kind`` (``""`` for an answer)."""

_PUNCT_TO_SPACE = str.maketrans({c: " " for c in string.punctuation})


def _is_missing(s) -> bool:
    return s is None or (isinstance(s, float) and math.isnan(s))


# ---------------------------------------------------------------------------- normalisation
def normalize_text(s) -> str:
    """The paper's normalisation of a transcript (headline WER).

    Lower-case, replace each ASCII punctuation character (``string.punctuation``) by a space,
    collapse white space — as ``_normalize_asr_text`` of the authors' ``06_score_metrics.py``.
    Typographic quotes, fillers and numbers are left alone (see :func:`normalize_whisper`).

    Parameters
    ----------
    s : str or None
        Raw text. ``None`` and NaN count as empty.

    Returns
    -------
    str
        Words separated by single spaces (may be empty).

    Examples
    --------
    >>> normalize_text("Mr. Smith's  2 cats!")
    'mr smith s 2 cats'
    >>> normalize_text("don\u2019t")
    'don\u2019t'
    """
    if _is_missing(s):
        return ""
    return " ".join(str(s).lower().translate(_PUNCT_TO_SPACE).split())


def normalize_whisper(s) -> str:
    """OpenAI's English text normaliser (Whisper-style WER), with upstream PR #2836.

    Lower-cases, removes bracketed text and fillers (``uh``, ``um``), expands contractions and
    titles (``Mr`` → ``mister``), standardises numbers and currencies (``two`` → ``2``,
    ``one dollar`` → ``$1``), maps British to American spelling and removes symbols, exactly as
    ``whisper.normalizers.EnglishTextNormalizer`` of the installed ``openai-whisper`` release,
    whose last release spells every ``1`` next to ``$``, ``.``, ``%`` or ``-`` as ``one``;
    upstream fixed that (only a standalone ``1`` becomes ``one``) and the fix is applied here.

    Parameters and return value as :func:`normalize_text`.

    Raises
    ------
    ImportError
        If ``openai-whisper`` is not installed.

    Examples
    --------
    >>> normalize_whisper("it costs one dollar"), normalize_whisper("it costs one")
    ('it costs $1', 'it costs one')
    >>> normalize_whisper("the cause of it")
    'the cause of it'
    """
    if _is_missing(s):
        return ""
    return english_normalizer()(str(s)).strip()


def reference_is_empty(text) -> bool:
    """Whether a reference transcript has no word left after normalisation.

    True when the headline normalisation (:func:`normalize_text`) *or* the Whisper-style one
    (:func:`normalize_whisper`, which drops fillers such as ``uh`` and bracketed text such as
    ``[music]``) leaves nothing: per-utterance WER is undefined for such a reference, so item
    banks and custom validation should refuse it.

    Examples
    --------
    >>> [reference_is_empty(t) for t in ["", "...", "uh", "[music]", "the cat"]]
    [True, True, True, True, False]
    """
    return not normalize_text(text) or not normalize_whisper(text)


# ------------------------------------------------------------------------------------- WER
def align(ref_norm: str, hyp_norm: str) -> tuple[int, int, int, int]:
    """Substitutions, deletions, insertions and hits of two normalised strings (jiwer [2]_).

    An empty reference gives ``(0, 0, len(hyp words), 0)``; an empty hypothesis all deletions.

    Parameters
    ----------
    ref_norm, hyp_norm : str
        Normalised text, words separated by white space.

    Returns
    -------
    (S, D, I, H) : tuple of int
    """
    import jiwer

    r, h = ref_norm.split(), hyp_norm.split()
    if not r:
        return 0, 0, len(h), 0
    if not h:
        return 0, len(r), 0, 0
    o = jiwer.process_words(" ".join(r), " ".join(h))
    return int(o.substitutions), int(o.deletions), int(o.insertions), int(o.hits)


def max_ngram_repeats(words, max_n: int = LOOP_MAX_N) -> tuple[int, int]:
    """Longest run of one n-gram repeated back to back.

    Parameters
    ----------
    words : sequence of str
    max_n : int
        Longest n-gram tried (n = 1 … ``max_n``).

    Returns
    -------
    (repeats, n) : tuple of int
        The largest number of consecutive copies of one n-gram, and its n (the smallest n for
        that count); ``(1, 1)`` for a non-empty text without repeats, ``(0, 0)`` when empty.

    Examples
    --------
    >>> max_ngram_repeats("left and left and left and left and".split())
    (4, 2)
    """
    w = list(words)
    if not w:
        return 0, 0
    best, best_n = 1, 1
    for n in range(1, max_n + 1):
        for start in range(n):           # each phase of the n-gram grid
            run, i = 1, start
            while i + 2 * n <= len(w):
                if w[i + n:i + 2 * n] == w[i:i + n]:
                    run += 1
                    if run > best:
                        best, best_n = run, n
                else:
                    run = 1
                i += n
    return best, best_n


def loop_kind(ref_norm: str, hyp_norm: str) -> str:
    """Classify a hypothesis as a repetition loop.

    Rule: ``"length"`` when the reference has words and the hypothesis has at least
    :data:`LOOP_LENGTH_RATIO` (3) times as many; else ``"ngram"`` when some n-gram with
    n ≤ :data:`LOOP_MAX_N` (4) occurs at least :data:`LOOP_MIN_REPEATS` (4) times back to back in
    the hypothesis and more times in a row than anywhere in the reference (so a reference that
    itself says "no no no no" is not a loop when recognised faithfully); else ``""``.

    Parameters
    ----------
    ref_norm, hyp_norm : str
        Normalised reference and hypothesis (white-space separated words).

    Returns
    -------
    str
        ``"length"``, ``"ngram"`` or ``""``.
    """
    r, h = ref_norm.split(), hyp_norm.split()
    if r and len(h) >= LOOP_LENGTH_RATIO * len(r):
        return "length"
    rep_h, _ = max_ngram_repeats(h)
    if rep_h >= LOOP_MIN_REPEATS and rep_h > max_ngram_repeats(r)[0]:
        return "ngram"
    return ""


def score_asr_row(reference, response) -> dict:
    """Every per-row ASR score of ``results/scores/<asr task>.csv``.

    Parameters
    ----------
    reference : str
        Reference transcript (raw).
    response : str
        Recogniser output (raw; ``None`` counts as empty).

    Returns
    -------
    dict
        Headline (paper normalisation, :func:`normalize_text`): ``ref_norm, hyp_norm,
        substitutions, deletions, insertions, hits`` (int), ``errors`` = S + D + I,
        ``ref_words`` = H + S + D, ``wer`` = errors / ref_words, ``ref_empty`` (bool),
        ``score_failed`` (bool). Whisper-style (:func:`normalize_whisper`): ``ref_whisper,
        hyp_whisper, errors_whisper, ref_words_whisper, wer_whisper``. Loops:
        ``hyp_words`` (headline words), ``is_loop`` (bool), ``loop_kind`` (:func:`loop_kind`).

    Notes
    -----
    * Empty reference after normalisation (``ref_empty``): errors are the insertions (``("",
      "")`` → 0, ``("", "x y")`` → 2), ``ref_words`` = 0 and the per-utterance ``wer`` is NaN
      (undefined, counted apart); corpus WER Σ errors / Σ ref_words still counts the
      insertions. ``wer_whisper`` is NaN in the same way when the Whisper-normalised reference
      is empty. (The authors' code would give 1.0 through its failure rule with jiwer 3, and
      the insertion count with jiwer 4; validation refuses such items, see
      :func:`reference_is_empty`.)
    * A scoring failure (an exception in the alignment) counts as WER 1.0 with every reference
      word deleted (``score_failed`` = True), as the authors' ``generate_results_new_2.py``.
    """
    ref_n, hyp_n = normalize_text(reference), normalize_text(response)
    n_ref = len(ref_n.split())
    failed = False
    try:
        s, d, i, h = align(ref_n, hyp_n)
    except Exception:  # the paper's rule: a scoring failure counts 1.0
        s, d, i, h, failed = 0, n_ref, 0, 0, True
    errors, ref_words = s + d + i, h + s + d
    ref_w, hyp_w = normalize_whisper(reference), normalize_whisper(response)
    sw, dw, iw, hw = align(ref_w, hyp_w)
    kind = loop_kind(ref_n, hyp_n)
    return dict(ref_norm=ref_n, hyp_norm=hyp_n, substitutions=s, deletions=d, insertions=i, hits=h,
                errors=errors, ref_words=ref_words, wer=errors / ref_words if ref_words else float("nan"),
                ref_empty=n_ref == 0, score_failed=failed, ref_whisper=ref_w, hyp_whisper=hyp_w,
                errors_whisper=sw + dw + iw, ref_words_whisper=hw + sw + dw,
                wer_whisper=(sw + dw + iw) / (hw + sw + dw) if hw + sw + dw else float("nan"),
                hyp_words=len(hyp_n.split()), is_loop=bool(kind), loop_kind=kind)


# ------------------------------------------------------------------------------------- KWS
def kws_first_word(response) -> str:
    """The word a KWS answer is scored on (the authors' rule).

    ``str(response).lower().strip()``; its first white-space token, or ``"silence"`` when the
    response is empty; then ASCII punctuation (``string.punctuation``) stripped from both ends.

    Parameters
    ----------
    response : str or None
        ``None``/NaN count as empty.

    Returns
    -------
    str
        Possibly empty (a token made only of punctuation, e.g. ``"**"``).

    Examples
    --------
    >>> [kws_first_word(r) for r in ["Yes.", "**yes**", "Yes, it is.", "", "- go", "\u201cno\u201d"]]
    ['yes', 'yes', 'yes', 'silence', '', '\u201cno\u201d']
    """
    text = "" if _is_missing(response) else str(response).lower().strip()
    token = text.split()[0] if text else KWS_EMPTY_WORD
    return token.strip(string.punctuation)


def normalize_kws_label(text) -> str:
    """Normalise a KWS label the way responses are read (``"Yes!"`` → ``"yes"``).

    Lower-case, strip white space and then ASCII punctuation at both ends, white space inside
    collapsed. For a one-word label this equals :func:`kws_first_word`; a label that keeps a
    space can never be matched by the first-word rule (validation should refuse it).

    Parameters
    ----------
    text : str or None

    Returns
    -------
    str
        ``""`` for a missing or punctuation-only label.

    Examples
    --------
    >>> normalize_kws_label(" Yes! "), normalize_kws_label("'Left'"), normalize_kws_label("GO")
    ('yes', 'left', 'go')
    """
    if _is_missing(text):
        return ""
    return " ".join(str(text).lower().split()).strip(string.punctuation).strip()


def kws_correct(response, label, is_target, *, keywords=KEYWORDS) -> bool:
    """The paper's KWS scoring rule.

    Parameters
    ----------
    response : str
        Model answer.
    label : str
        The word spoken in the clip (normalised with :func:`normalize_kws_label`).
    is_target : bool
        Whether the clip is one of ``keywords``.
    keywords : sequence of str
        The closed set (default :data:`KEYWORDS`).

    Returns
    -------
    bool
        Target clip: ``kws_first_word(response) == label``. Non-target clip: the first word is
        none of ``keywords`` (so an empty answer, read as ``"silence"``, is a correct
        rejection — see :func:`kws_non_answer` for the strict view).
    """
    first = kws_first_word(response)
    if bool(is_target):
        return first == normalize_kws_label(label)
    return first not in {normalize_kws_label(k) for k in keywords}


_REFUSAL = re.compile(
    r"\bsorry\b"
    r"|\bi\s*(?:'m|am)\s+(?:not\s+able|unable)\b"
    r"|\b(?:can\s*not|can't|couldn't|could\s+not|unable\s+to)\s+(?:hear|determine|identify|"
    r"understand|tell|make\s+out|detect|recogni[sz]e|transcribe|help|assist|provide|answer)\b"
    r"|\bi\s+(?:don't|do\s+not)\s+know\b"
    r"|\b(?:no|not\s+any)\s+(?:clear\s+|audible\s+|discernible\s+|intelligible\s+|"
    r"recogni[sz]able\s+)?(?:speech|spoken\s+words?|audio|voice)\b"
    r"|\b(?:inaudible|unintelligible|not\s+clear|unclear)\b"
)


def kws_non_answer(response) -> tuple[bool, str]:
    """Whether a KWS response is a non-answer, and which kind.

    Kinds, first match wins: ``"empty"`` — nothing but white space and ASCII punctuation;
    ``"refusal"`` — an apology or refusal phrase (``sorry``, ``I can't hear/determine …``,
    ``I'm unable``, ``I don't know``, ``no (clear) speech/audio/voice``, ``inaudible``,
    ``unintelligible``, ``unclear``, ``not clear``); ``"multi_word"`` — more than one word
    (tokens made only of punctuation, such as a ``-`` bullet, do not count). A single word,
    including ``silence``, ``none`` or ``unknown``, is an answer.

    Parameters
    ----------
    response : str or None

    Returns
    -------
    (non_answer, kind) : (bool, str)
        ``kind`` is one of :data:`NON_ANSWER_KINDS`, or ``""`` for an answer.

    Examples
    --------
    >>> [kws_non_answer(r)[1] for r in ["", "Sorry, I can't tell.", "The word is yes.", "yes"]]
    ['empty', 'refusal', 'multi_word', '']
    """
    text = "" if _is_missing(response) else str(response).lower().strip()
    words = [t for t in (w.strip(string.punctuation) for w in text.split()) if t]
    if not words:
        return True, "empty"
    if _REFUSAL.search(text.replace("\u2019", "'")):
        return True, "refusal"
    if len(words) > 1:
        return True, "multi_word"
    return False, ""


def score_kws_row(response, label, is_target, keywords=KEYWORDS) -> dict:
    """Every per-row KWS score of ``results/scores/<kws task>.csv``.

    Parameters are those of :func:`kws_correct`.

    Returns
    -------
    dict
        ``first_word`` (:func:`kws_first_word`), ``correct`` (0/1, the paper's rule,
        :func:`kws_correct`), ``non_answer`` (bool), ``non_answer_kind`` (:func:`kws_non_answer`)
        and ``correct_strict`` (0/1: correct and not a non-answer).
    """
    ok = kws_correct(response, label, is_target, keywords=keywords)
    non, kind = kws_non_answer(response)
    return dict(first_word=kws_first_word(response), correct=int(ok), non_answer=non, non_answer_kind=kind,
                correct_strict=int(ok and not non))
