"""`python -m compiler` is the `kernel-lens` CLI."""
import sys

from compiler.cli import main

sys.exit(main())
