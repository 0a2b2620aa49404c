"""Stage 7: the runner, its resume rule, shards, prompts and the recognisers."""
