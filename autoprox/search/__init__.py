"""Layer 6: fitness, evolution, run directories and the run object (RunContext)."""
