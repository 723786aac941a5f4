"""Layer 1: architecture spaces (parsing, sampling, parameter and MAC counts) and coarse descriptors."""
