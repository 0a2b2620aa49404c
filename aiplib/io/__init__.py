"""Audio files and the pipeline's file formats (one reader and one writer per file)."""
