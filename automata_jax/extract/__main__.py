"""``python -m automata_jax.extract``: the extraction job (see `automata_jax.extract`)."""

import sys

from automata_jax.extract import main

sys.exit(main())
