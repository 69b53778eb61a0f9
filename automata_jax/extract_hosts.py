"""The extraction job across hosts (``python -m automata_jax.extract_hosts run|merge``).

See `automata_jax._extract_hosts` for what each process does and how parts merge.
"""

from __future__ import annotations

import sys

from automata_jax._extract_hosts import main, merge, part_path

__all__ = ["main", "merge", "part_path"]

if __name__ == "__main__":
    sys.exit(main())
