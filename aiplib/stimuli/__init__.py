"""Stages 5–6: the mixer, the condition families, the manifests and the manipulation checks."""
