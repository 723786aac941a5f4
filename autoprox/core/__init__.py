"""Layer 0: errors, atomic files, progress lines and the correlation math; imports nothing else of autoprox."""
