"""Layer 9: the ``autoprox`` command line, one module per command."""
