"""Stage 10: the explorer's data, audio and interface."""
