"""Stage-independent facts and plumbing: errors, tasks, workspace paths, seeds, hashes, the
data-folder lock, notebook parameters, progress, stamps and the text rules."""

__version__ = "0.1.0"

#: The pipeline's default seed: item selection (stage 2), the synthetic backgrounds (stage 3) and
#: the manipulation checks (stage 6), whose notebooks' ``seed`` parameter defaults to it (``make
#: SEED=N`` passes another). The mixing seeds of stage 5 are not this: they count manifest rows
#: (``seed_offset``).
DEFAULT_SEED = 20240917
