"""Stage 8: WER, the keyword-spotting rule, score files and the stimuli left out."""
