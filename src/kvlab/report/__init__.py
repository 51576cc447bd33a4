"""Reports of a run: markdown, HTML and plots, rebuilt from the run directory."""
