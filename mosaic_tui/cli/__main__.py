"""`python -m mosaic_tui.cli`: the `mosaic` command."""
import sys

from mosaic_tui.cli import main

sys.exit(main())
