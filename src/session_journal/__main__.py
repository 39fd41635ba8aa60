"""`python -m session_journal` runs the command line."""

import sys

from .cli import main

sys.exit(main())
