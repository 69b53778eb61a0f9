"""What the two command lines share (``python -m automata_compile`` and
``python -m automata_jax.extract``): warnings as plain ``warning: ...`` lines, and
error lines that name the command line's own flag (``--lenient``), not the Python API's
(``strict=False``). Standard library only: the compiler's CLI never imports jax.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator

from automata_compile._errors import UnsupportedSchemaError

LENIENT_FLAG = "--lenient"


@contextlib.contextmanager
def plain_warnings() -> Iterator[None]:
    """While open, every warning is one ``warning: MESSAGE`` line on stderr (no category, no
    Python source path); the previous handler is restored on exit."""
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        yield


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def error_line(error: Exception) -> str:
    """``error: MESSAGE`` for a refusal; a schema refusal names ``--lenient``."""
    if isinstance(error, UnsupportedSchemaError):
        return f"error: {error.message_for(LENIENT_FLAG)}"
    return f"error: {error}"
