"""The evaluation protocols: each cuts its architectures, targets, spaces or tables into cuts, runs what each cut
needs, and scores it on what the cut held out, all over the one runner (:mod:`autoprox.apps.protocols.runner`).

* :mod:`~autoprox.apps.protocols.outer_folds` (``autoprox evaluate``): outer folds of one benchmark
  (:mod:`~autoprox.apps.protocols.folds`, :mod:`~autoprox.apps.protocols.bagging`), summarised with paired
  intervals (:mod:`~autoprox.apps.protocols.summary`);
* :mod:`~autoprox.apps.protocols.cross_space` (``evaluate --leave-space-out``): each labelled space left out;
* :mod:`~autoprox.apps.protocols.space` (``evaluate --leave-space-out --rank-formulas``): the N-space protocol
  over proxy tables;
* :mod:`~autoprox.apps.protocols.few_labels` (``evaluate --few-labels``): methods fitted on k labelled rows;
* :mod:`~autoprox.apps.protocols.transfer` (``autoprox transfer``): each target held out of a joint search.

:mod:`~autoprox.apps.protocols.jobs` runs a cut's searches, inline, side by side or on a cluster.
"""
