"""``python -m numba_cube_trace TRACE.json [-o OUT.png]``."""

from .cli import main

raise SystemExit(main())
