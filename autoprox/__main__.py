"""``python -m autoprox``: the same as the ``autoprox`` command (and ``python -m autoprox.cli``)."""

import sys

from autoprox.cli.main import main

sys.exit(main())
