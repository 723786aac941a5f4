"""Layer 2: PyTorch models of the spaces, their per-block statistics and the hand-crafted zoo measures."""
