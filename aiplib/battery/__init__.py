"""Stages 3–4: the background battery (curation), its acoustic descriptors and VAD."""
