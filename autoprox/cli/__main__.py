"""``python -m autoprox.cli``: the same as the ``autoprox`` command."""

import sys

from autoprox.cli.main import main

sys.exit(main())
