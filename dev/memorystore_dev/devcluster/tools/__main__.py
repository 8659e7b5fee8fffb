"""Run the tool builder's command line (see cli.py)."""

import sys

from memorystore_dev.devcluster.tools.cli import main

sys.exit(main())
