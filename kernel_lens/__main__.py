"""`python -m kernel_lens` is the `kernel-lens` command."""
import sys

from kernel_lens.cli import main

sys.exit(main())
