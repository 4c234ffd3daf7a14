"""``python -m structgen`` runs the CLI."""

import sys

from structgen.cli import main

sys.exit(main())
