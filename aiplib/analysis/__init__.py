"""Stage 9: statistics, condition tables, provenance, run comparison and criteria."""
