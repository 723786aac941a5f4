"""Layer 4: expression-tree genomes over the ``primitives`` package: template and free trees."""
