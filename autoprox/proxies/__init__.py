"""Layer 5: one proxy object for every kind (architecture, zoo, genome), its scores and figures."""
