"""Stages 1–2: downloads, corpora and item banks of each profile."""
