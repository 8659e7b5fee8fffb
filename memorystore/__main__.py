import sys

from memorystore.cli import main

sys.exit(main())
