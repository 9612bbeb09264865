"""``python -m gpufs``: the same command line as the ``gpufs`` script (see ``gpufs.cli``)."""

import sys

from .cli import main

sys.exit(main())
