"""``autoprox report``: a run's or a protocol's report as one self-contained HTML file.

:mod:`~autoprox.reports.html.report` tells which kind of folder it is given and writes its page;
:mod:`~autoprox.reports.html.page` holds the page frame and its helpers, :mod:`~autoprox.reports.html.figures`
the inline SVG figures; :mod:`~autoprox.reports.html.run` and :mod:`~autoprox.reports.html.evolution` a run's
sections, :mod:`~autoprox.reports.html.protocol` and :mod:`~autoprox.reports.html.spaces` the protocols';
:mod:`~autoprox.reports.html.serve` serves a report live.
"""
