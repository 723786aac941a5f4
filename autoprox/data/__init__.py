"""Layer 3: benchmark files and the statistics cache (what to compute, where it is kept)."""
