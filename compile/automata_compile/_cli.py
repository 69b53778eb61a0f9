"""What the two command lines share (``python -m automata_compile`` and
``python -m automata_jax.extract``): warnings as plain ``warning: ...`` lines, and
error lines that name the command line's own flag (``--lenient``), not the Python API's
(``strict=False``), and `progress`, a spinner for compiles that take over a second.
Standard library only: the compiler's CLI never imports jax.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
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


_FRAMES = "|/-\\"


@contextlib.contextmanager
def progress(
    label: str,
    *,
    enabled: bool | None = None,
    delay: float = 1.0,
    interval: float = 0.2,
    stream=None,
) -> Iterator[None]:
    """While open, tells the user that ``label`` is still running, so that a slow compile
    is not mistaken for a hang: a background thread waits ``delay`` seconds and, only if
    the block is still running, writes ``label ... 3.2 s`` to ``stream`` (default stderr):
    a spinner redrawn in place on a terminal, else one line every 10 s. ``enabled=None``
    shows it only when the stream is a terminal (``--progress`` passes ``True``), so
    pipes and tests stay quiet."""
    out = sys.stderr if stream is None else stream
    if enabled is None:
        enabled = bool(getattr(out, "isatty", lambda: False)())
    if not enabled:
        yield
        return
    tty = bool(getattr(out, "isatty", lambda: False)())
    done = threading.Event()
    t0 = time.monotonic()
    shown = []

    def run() -> None:
        if done.wait(delay):
            return
        k = 0
        while True:
            elapsed = time.monotonic() - t0
            if tty:
                out.write(f"\r{_FRAMES[k % 4]} {label} ... {elapsed:.1f} s")
            elif k % max(1, round(10 / interval)) == 0:
                out.write(f"{label} ... still running after {elapsed:.0f} s\n")
            out.flush()
            shown.append(True)
            k += 1
            if done.wait(interval):
                return

    thread = threading.Thread(target=run, name="automata-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if shown and tty:
            out.write("\r\x1b[K")
            out.flush()
