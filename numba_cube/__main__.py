"""``python -m numba_cube {demo, info}``."""

from .cli import main

raise SystemExit(main())
