"""Run the image harness's command line (see cli.py)."""

import sys

from memorystore_dev.devcluster.images.cli import main

sys.exit(main())
