"""Layer 8: readable formulas, hall-of-fame display, standalone export, evolution curves."""
