"""Text rules of stage 8: normalisation, per-utterance WER, loops and the keyword-spotting rule.

* Headline (the paper's): :func:`normalize_text`, as ``_normalize_asr_text`` of the authors'
  ``scripts/06_score_metrics.py`` (IvLabs/AIP-Speech); per-utterance WER is jiwer's
  ``process_words``.
* Whisper-style: :func:`normalize_whisper`, openai-whisper's ``EnglishTextNormalizer`` (Radford et
  al.,
  arXiv:2212.04356) with openai/whisper PR #2836 (:mod:`aiplib.core.textnorm_whisper`).
* KWS: the authors' rule (``_score_kws_row`` of ``06_score_metrics.py``, ``is_correct`` of
  ``generate_results_new_2.py``), :data:`KWS_RULE`; :func:`kws_non_answer` marks non-answers beside
  it.
"""

from __future__ import annotations

import importlib.metadata
import math
import re
import string
import unicodedata

import jiwer

from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import KEYWORDS, normalize_keyword
from aiplib.core.textnorm_whisper import (
    WHISPER_NORMALIZER_NAME,  # noqa: F401 - re-exported with the headline names
    WHISPER_NORMALIZER_VERSION,  # noqa: F401
    english_normalizer,
)

#: Name of the headline normalisation (:func:`normalize_text`).
NORMALIZER_NAME = "aip-speech-paper"
#: Version of the headline normalisation; bumped if the rule ever changes. Version 2 adds Unicode
#: NFC and full-width / CJK punctuation to version 1 (the authors' rule): the same output for text
#: in NFC without those characters (every English reference and answer of the demo and the paper).
NORMALIZER_VERSION = "2"
#: The headline normalisation in words (written into the provenance).
NORMALIZER_RULE = (
    "Unicode NFC; lower-case; each ASCII punctuation character (string.punctuation) and each "
    "full-width or CJK punctuation mark (U+3000-U+303F, U+FF00-U+FF65) -> space; "
    "white space collapsed"
)
#: The Unicode normal form applied first to every reference and answer: NFC (canonical
#: composition) makes ``e`` + U+0301 and ``é`` one character, so a reference in NFD and an answer
#: in NFC align; NFKC is not used because it also folds compatibility characters (``²`` → ``2``,
#: ``ﬁ`` → ``fi``, ``…`` → ``...``, full-width letters), which would change what the authors'
#: rule scores on English text.
UNICODE_FORM = "NFC"
#: The installed jiwer's version (word alignment).
JIWER_VERSION = importlib.metadata.version("jiwer")
#: A hypothesis with at least this many times the reference's words is a loop.
LOOP_LENGTH_RATIO = 3
#: Longest n-gram (words) searched for back-to-back repeats.
LOOP_MAX_N = 4
#: An n-gram repeated this many times in a row (more than in the reference) is a loop.
LOOP_MIN_REPEATS = 4
#: What an empty KWS response reads as (the authors' rule).
KWS_EMPTY_WORD = "silence"
#: The KWS rule in words (:func:`kws_correct`).
KWS_RULE = (
    "first white-space token of the lower-cased, stripped response, stripped of ASCII "
    "punctuation at both ends ('silence' for an empty response); target clip: equals "
    "the label (normalised the same way); non-target clip: is none of the keywords"
)

#: Blocks of full-width and CJK punctuation: CJK Symbols and Punctuation, Halfwidth and Fullwidth
#: Forms (up to the half-width katakana).
_WIDE_PUNCT_BLOCKS = ((0x3000, 0x303F), (0xFF00, 0xFF65))
#: Full-width and CJK punctuation marks and symbols (Unicode category P* or S*) of those blocks.
_WIDE_PUNCT = "".join(
    chr(c)
    for lo, hi in _WIDE_PUNCT_BLOCKS
    for c in range(lo, hi + 1)
    if unicodedata.category(chr(c))[0] in "PS"
)
#: Translation table: each ASCII, full-width or CJK punctuation character to a space.
_PUNCT_TO_SPACE = str.maketrans({c: " " for c in string.punctuation + _WIDE_PUNCT})


def _is_missing(s) -> bool:
    """``None`` or a float NaN (an empty cell of a table)."""
    return s is None or (isinstance(s, float) and math.isnan(s))


def normalize_text(s) -> str:
    """The paper's normalisation (headline WER) after Unicode NFC (:data:`UNICODE_FORM`):
    lower-case, each ASCII, full-width or CJK punctuation character a space, white space collapsed;
    ``None``/NaN give ``""``. Typographic quotes, fillers and numbers stay.

    Examples
    --------
    >>> normalize_text("Mr. Smith's  2 cats!")
    'mr smith s 2 cats'
    >>> normalize_text("don\u2019t")
    'don\u2019t'
    >>> normalize_text("cafe\u0301") == normalize_text("caf\u00e9")
    True
    >>> normalize_text("\u6211\u559c\u6b22\u732b\u3002")
    '\u6211\u559c\u6b22\u732b'
    """
    if _is_missing(s):
        return ""
    text = unicodedata.normalize(UNICODE_FORM, str(s))
    return " ".join(text.lower().translate(_PUNCT_TO_SPACE).split())


def normalize_whisper(s) -> str:
    """OpenAI's ``EnglishTextNormalizer`` (Whisper-style WER) with PR #2836: fillers and bracketed
    text removed, numbers and currencies standardised (``one dollar`` → ``$1``), British → American
    spelling.

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
    return english_normalizer()(unicodedata.normalize(UNICODE_FORM, str(s))).strip()


def reference_is_empty(text) -> bool:
    """True when :func:`normalize_text` or :func:`normalize_whisper` leaves no word (WER undefined).

    Examples
    --------
    >>> [reference_is_empty(t) for t in ["", "...", "uh", "[music]", "the cat"]]
    [True, True, True, True, False]
    """
    return not normalize_text(text) or not normalize_whisper(text)


#: Unicode blocks of scripts written without spaces between words: Thai, Lao, Myanmar, Khmer,
#: Hiragana, Katakana, CJK Unified Ideographs Extension A, CJK Unified Ideographs, CJK Compatibility
#: Ideographs, half-width Katakana (Hangul is not among them: Korean puts spaces between words).
_SPACELESS_BLOCKS = (
    (0x0E00, 0x0EFF),
    (0x1000, 0x109F),
    (0x1780, 0x17FF),
    (0x3040, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F),
)
#: Share of the references' letters in a script without word spaces from which CER, not WER, is
#: the headline measure (a sentence of such text is one "word" for WER).
SPACELESS_SHARE = 0.5


def _in_spaceless_script(ch: str) -> bool:
    """True for a character of :data:`_SPACELESS_BLOCKS`."""
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _SPACELESS_BLOCKS)


def spaceless_share(texts) -> float:
    """Share (0–1) of the letters and marks (Unicode categories L*, M*) of ``texts`` (a sequence of
    str; None/NaN skipped) that belong to a script written without word spaces (Thai, Lao, Myanmar,
    Khmer, kana, CJK ideographs); 0.0 without letters.

    Examples
    --------
    >>> spaceless_share(["the cat"]), spaceless_share(["\u6211\u559c\u6b22\u732b\u3002"])
    (0.0, 1.0)
    """
    n_letters = 0
    n_spaceless = 0
    for text in texts:
        if _is_missing(text):
            continue
        for ch in unicodedata.normalize(UNICODE_FORM, str(text)):
            if unicodedata.category(ch)[0] in "LM":
                n_letters += 1
                n_spaceless += _in_spaceless_script(ch)
    return n_spaceless / n_letters if n_letters else 0.0


def headline_measure(references) -> str:
    """``"cer"`` when at least :data:`SPACELESS_SHARE` of the letters of ``references`` (sequence of
    str) are in a script without word spaces (:func:`spaceless_share`), else ``"wer"``: the error
    rate that stage 8 and validation call the headline."""
    return "cer" if spaceless_share(references) >= SPACELESS_SHARE else "wer"


def align(ref_norm: str, hyp_norm: str) -> tuple[int, int, int, int]:
    """``(S, D, I, H)`` of two normalised strings (jiwer); an empty reference gives ``(0, 0, n_hyp,
    0)``."""
    ref_words = ref_norm.split()
    hyp_words = hyp_norm.split()
    if not ref_words:
        return 0, 0, len(hyp_words), 0
    if not hyp_words:
        return 0, len(ref_words), 0, 0
    out = jiwer.process_words(" ".join(ref_words), " ".join(hyp_words))
    return int(out.substitutions), int(out.deletions), int(out.insertions), int(out.hits)


def max_ngram_repeats(words, max_n: int = LOOP_MAX_N) -> tuple[int, int]:
    """Largest number of back-to-back copies of one n-gram (n ≤ ``max_n``) and its smallest n;
    ``(1, 1)`` without repeats, ``(0, 0)`` for no words.

    Examples
    --------
    >>> max_ngram_repeats("left and left and left and left and".split())
    (4, 2)
    """
    words = list(words)
    if not words:
        return 0, 0
    best = 1
    best_n = 1
    for n in range(1, max_n + 1):
        for start in range(n):  # each phase of the n-gram grid
            run = _longest_run(words, n, start)
            if run > best:
                best = run
                best_n = n
    return best, best_n


def _longest_run(words: list, n: int, start: int) -> int:
    """Most back-to-back copies of one n-gram on the grid ``start, start + n, ...`` (1 without)."""
    longest = 1
    run = 1
    i = start
    while i + 2 * n <= len(words):
        if words[i + n : i + 2 * n] == words[i : i + n]:
            run += 1
            longest = max(longest, run)
        else:
            run = 1
        i += n
    return longest


def loop_kind(ref_norm: str, hyp_norm: str) -> str:
    """``"length"`` when the hypothesis has ≥ 3× the reference's words; else ``"ngram"`` when an
    n-gram (n ≤ 4) repeats ≥ 4 times back to back, more than anywhere in the reference; else
    ``""``."""
    ref_words = ref_norm.split()
    hyp_words = hyp_norm.split()
    if ref_words and len(hyp_words) >= LOOP_LENGTH_RATIO * len(ref_words):
        return "length"
    hyp_repeats = max_ngram_repeats(hyp_words)[0]
    if hyp_repeats < LOOP_MIN_REPEATS:
        return ""
    if hyp_repeats > max_ngram_repeats(ref_words)[0]:
        return "ngram"
    return ""


def _failed_alignment(n_ref: int) -> tuple[int, int, int, int]:
    """``(S, D, I, H)`` counted for an alignment that failed: every reference word deleted."""
    return 0, n_ref, 0, 0


def _rate(errors: int, ref_words: int) -> float:
    """``errors / ref_words``; NaN when the reference has no word."""
    if not ref_words:
        return float("nan")
    return errors / ref_words


def score_asr_row(reference, response) -> dict:
    """Every per-row ASR score of ``results/scores/<asr task>.csv`` (raw texts; ``None`` counts as
    empty).

    Headline: ``ref_norm, hyp_norm, substitutions, deletions, insertions, hits``, ``errors`` = S + D
    + I, ``ref_words`` = H + S + D, ``wer``, ``ref_empty``, ``score_failed``; Whisper-style:
    ``ref_whisper, hyp_whisper, errors_whisper, ref_words_whisper, wer_whisper``; ``hyp_words``,
    ``is_loop``, ``loop_kind``. An empty normalised reference has ``ref_words`` = 0 and ``wer`` NaN
    (its insertions still count in the corpus WER). An alignment failure counts WER 1.0, every
    reference word deleted (the authors' ``generate_results_new_2.py``).
    """
    ref_n = normalize_text(reference)
    hyp_n = normalize_text(response)
    n_ref = len(ref_n.split())
    failed = False
    try:
        s, d, i, h = align(ref_n, hyp_n)
    except Exception:  # the paper's rule: a scoring failure counts 1.0
        s, d, i, h = _failed_alignment(n_ref)
        failed = True
    errors = s + d + i
    ref_words = h + s + d
    ref_w = normalize_whisper(reference)
    hyp_w = normalize_whisper(response)
    sw, dw, iw, hw = align(ref_w, hyp_w)
    kind = loop_kind(ref_n, hyp_n)
    return dict(
        ref_norm=ref_n,
        hyp_norm=hyp_n,
        substitutions=s,
        deletions=d,
        insertions=i,
        hits=h,
        errors=errors,
        ref_words=ref_words,
        wer=_rate(errors, ref_words),
        ref_empty=n_ref == 0,
        score_failed=failed,
        ref_whisper=ref_w,
        hyp_whisper=hyp_w,
        errors_whisper=sw + dw + iw,
        ref_words_whisper=hw + sw + dw,
        wer_whisper=_rate(sw + dw + iw, hw + sw + dw),
        hyp_words=len(hyp_n.split()),
        is_loop=bool(kind),
        loop_kind=kind,
    )


def kws_first_word(response) -> str:
    """The word a KWS answer is scored on (the authors' rule): the first white-space token of the
    lower-cased response (``"silence"`` when empty), ASCII punctuation stripped at both ends.

    Examples
    --------
    >>> [kws_first_word(r) for r in ["Yes.", "**yes**", "Yes, it is.", "", "- go"]]
    ['yes', 'yes', 'yes', 'silence', '']
    >>> kws_first_word("\u201cno\u201d")
    '\u201cno\u201d'
    """
    text = _lower_stripped(response)
    if not text:
        return KWS_EMPTY_WORD.strip(string.punctuation)
    return text.split()[0].strip(string.punctuation)


def _lower_stripped(response) -> str:
    """The response lower-cased and stripped of white space; ``""`` when missing."""
    if _is_missing(response):
        return ""
    return unicodedata.normalize(UNICODE_FORM, str(response)).lower().strip()


def normalize_kws_label(text) -> str:
    """A KWS label read the way responses are (lower-case, punctuation stripped at both ends);
    ``""`` for a missing or punctuation-only label.

    Examples
    --------
    >>> normalize_kws_label(" Yes! "), normalize_kws_label("'Left'"), normalize_kws_label("GO")
    ('yes', 'left', 'go')
    """
    if _is_missing(text):
        return ""
    return normalize_keyword(text)


def kws_correct(response, label, is_target, *, keywords=KEYWORDS) -> bool:
    """The paper's KWS rule: a target clip is correct when ``kws_first_word(response)`` equals the
    normalised ``label``; a non-target clip when the first word is none of ``keywords`` (so an empty
    answer, read as ``"silence"``, is a correct rejection)."""
    first = kws_first_word(response)
    if is_target:
        return first == normalize_kws_label(label)
    return first not in {normalize_kws_label(k) for k in keywords}


#: An apology or refusal phrase in a lower-cased answer (:func:`kws_non_answer`).
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
    """``(non_answer, kind)``: ``"empty"`` (only white space and punctuation), ``"refusal"`` (an
    apology or refusal phrase), ``"multi_word"`` (more than one word), first match wins; a single
    word is an answer (``(False, "")``).

    Examples
    --------
    >>> [kws_non_answer(r)[1] for r in ["", "Sorry, I can't tell.", "The word is yes.", "yes"]]
    ['empty', 'refusal', 'multi_word', '']
    """
    text = _lower_stripped(response)
    words = []
    for token in text.split():
        word = token.strip(string.punctuation)
        if word:
            words.append(word)
    if not words:
        return True, "empty"
    if _REFUSAL.search(text.replace("\u2019", "'")):
        return True, "refusal"
    if len(words) > 1:
        return True, "multi_word"
    return False, ""


def score_kws_row(response, label, is_target, keywords=KEYWORDS) -> dict:
    """Every per-row KWS score (arguments of :func:`kws_correct`): ``first_word``, ``correct``
    (0/1), ``non_answer``, ``non_answer_kind`` and ``correct_strict`` (0/1: correct and not a
    non-answer)."""
    ok = kws_correct(response, label, is_target, keywords=keywords)
    non, kind = kws_non_answer(response)
    return dict(
        first_word=kws_first_word(response),
        correct=int(ok),
        non_answer=non,
        non_answer_kind=kind,
        correct_strict=int(ok and not non),
    )


# ------------------------------------------------------------------ answer clean-up before scoring

#: The preambles the authors' stage 6 strips from an answer (``_clean_hyp`` of their
#: ``scripts/06_score_metrics.py``, IvLabs/AIP-Speech): one of these phrases at the start, any text
#: up to the first colon, the colon, white space and one opening quote; matched ignoring case.
AUTHORS_STAGE6_PREAMBLES = (
    "The transcription of the speech is",
    "The speech transcribed from the audio is",
    "The keyword is",
    "The word is",
)
#: One preamble of :data:`AUTHORS_STAGE6_PREAMBLES` up to its colon and one opening quote.
_AUTHORS_STAGE6_PREAMBLE = re.compile(
    "^(" + "|".join(re.escape(p) for p in AUTHORS_STAGE6_PREAMBLES) + ")[^:]*:\\s*['\"]?",
    flags=re.IGNORECASE,
)

#: Clean-up rules of an answer before it is scored (stage 8's ``response_cleanup``; the stored
#: inference rows are never changed): ``none`` scores the answer as generated (the authors' README;
#: their RER code), ``authors_stage6`` as their stage-6 tables did.
RESPONSE_CLEANUPS = {
    "none": "the answer as generated",
    "authors_stage6": (
        "the authors' stage 6 (_clean_hyp of scripts/06_score_metrics.py): stripped; a leading "
        "preamble (" + "; ".join(AUTHORS_STAGE6_PREAMBLES) + ") up to its colon and one "
        "opening quote removed, ignoring case; one closing quote removed; stripped again"
    ),
}


def clean_response(response, rule: str = "none") -> str:
    """An answer as it is scored under the clean-up ``rule`` (:data:`RESPONSE_CLEANUPS`).

    ``none`` returns ``str(response)`` unchanged. ``authors_stage6`` is the authors' ``_clean_hyp``
    (``scripts/06_score_metrics.py``, IvLabs/AIP-Speech): the text stripped of white space; a
    leading preamble of :data:`AUTHORS_STAGE6_PREAMBLES` with the text up to its colon, the colon,
    white space and one opening quote removed (ignoring case); then one closing ``'`` or ``"``
    removed (whether or not a preamble was) and the text stripped again. ``__ERROR__`` is left as it
    is.

    Raises
    ------
    AiplibParameterError
        If ``rule`` is not a key of :data:`RESPONSE_CLEANUPS`.

    Examples
    --------
    >>> clean_response("The transcription of the speech is: 'Hello world.'", "authors_stage6")
    'Hello world.'
    >>> clean_response("The keyword is 'yes'", "authors_stage6")
    "The keyword is 'yes"
    """
    if rule not in RESPONSE_CLEANUPS:
        raise AiplibParameterError(
            f"response_cleanup must be one of {list(RESPONSE_CLEANUPS)}, got {rule!r}"
        )
    text = str(response)
    if rule == "none":
        return text
    text = text.strip()
    if text == "__ERROR__":
        return text
    text = _AUTHORS_STAGE6_PREAMBLE.sub("", text)
    if text.endswith("'") or text.endswith('"'):
        text = text[:-1]
    return text.strip()
