"""``python -m dynacap``: the same command line as the ``dynacap`` script."""
import sys

from .cli import main

sys.exit(main())
