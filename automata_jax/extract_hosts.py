"""Old name of ``python -m automata_jax.extract.hosts run|merge``, kept as an alias."""

from __future__ import annotations

import sys

from automata_jax.extract.hosts import main, merge, part_path

__all__ = ["main", "merge", "part_path"]

if __name__ == "__main__":
    sys.exit(main())
