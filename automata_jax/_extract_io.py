"""Input records and the resumable output file of the extraction job (`automata_jax.extract`).

Input: JSON lines, one object per line with a text field (``text`` by default)
and optionally an ``id``; a record without ``id`` is identified by its line
number. A line that cannot be read (bad UTF-8, bad JSON, no text field) becomes
a `Record` carrying the error, so the job writes an error line for it and goes on.

Output: one JSON line per input record, appended, flushed and fsynced per batch.
On resume `OutputLog` reads the ids already written (those records are skipped)
and truncates a torn last line left by a crash, so nothing finished is lost and
nothing is written twice.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from automata_compile import AutomataError

__all__ = ["ExtractError", "OutputLog", "Record", "read_records", "record_key"]


class ExtractError(AutomataError, ValueError):
    """The extraction job cannot start: a bad input file, schema, template or option."""


@dataclasses.dataclass(frozen=True)
class Record:
    """One input line.

    Attributes:
      id: the record's ``id`` field, else its 1-based line number.
      line: 1-based line number in the input file.
      text: the text to extract from (None when ``error`` is set).
      error: why the line cannot be processed, or None.
    """

    id: Any
    line: int
    text: str | None = None
    error: str | None = None


def record_key(record_id: Any) -> str:
    """A hashable, canonical key for an id (ids may be any JSON value)."""
    return json.dumps(record_id, sort_keys=True, ensure_ascii=False)


def _open_input(path: str | os.PathLike) -> Path:
    path = Path(path)
    if not path.exists():
        raise ExtractError(f"input file {str(path)!r} does not exist")
    if path.is_dir():
        raise ExtractError(f"input {str(path)!r} is a directory, expected a JSON-lines file")
    return path


def read_records(path: str | os.PathLike, *, text_field: str = "text") -> Iterator[Record]:
    """Yields one `Record` per non-blank line of a JSON-lines file, in order.

    Lines that cannot be used are yielded with ``error`` set (the message names the
    line); a repeated ``id`` is an error on its later line.

    Raises:
      ExtractError: the file is missing, a directory, or unreadable.
    """
    path = _open_input(path)
    seen: dict[str, int] = {}
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; bytes so one bad line is one error
    except OSError as e:
        raise ExtractError(f"cannot read input file {str(path)!r}: {e.strerror or e}") from e
    with f:
        for line_no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            record = _parse_line(raw, line_no, text_field, str(path))
            key = record_key(record.id)
            if key in seen and record.error is None:
                record = dataclasses.replace(
                    record,
                    text=None,
                    error=f"line {line_no}: duplicate id {record.id!r} (first on line {seen[key]})",
                )
            seen.setdefault(key, line_no)
            yield record


def _parse_line(raw: bytes, line_no: int, text_field: str, where: str) -> Record:
    def bad(msg: str, record_id: Any = line_no) -> Record:
        return Record(id=record_id, line=line_no, error=f"{where}, line {line_no}: {msg}")

    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        return bad(f"not valid UTF-8 (byte {e.start})")
    except json.JSONDecodeError as e:
        return bad(f"not valid JSON ({e.msg} at column {e.colno})")
    if not isinstance(obj, dict):
        return bad(f"expected a JSON object, got {type(obj).__name__}")
    record_id = obj.get("id", line_no)
    if isinstance(record_id, dict | list):
        return bad("'id' must be a string or a number")
    text = obj.get(text_field)
    if text is None:
        return bad(f"no {text_field!r} field (choose the field with --text-field)", record_id)
    if not isinstance(text, str):
        return bad(f"field {text_field!r} is {type(text).__name__}, expected a string", record_id)
    return Record(id=record_id, line=line_no, text=text)


class OutputLog:
    """The output JSON-lines file, opened for appending, remembering which ids are done.

    Opening it recovers from a crash: a last line without its newline (or that does
    not parse) is truncated away; every complete line must be a JSON object with an
    ``id``. `append` writes whole lines, then flushes and fsyncs.

    Attributes:
      path: the output file.
      done: keys (`record_key`) of the records already written.
      truncated_bytes: how many bytes of a torn last line were dropped on open.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if self.path.is_dir():
            raise ExtractError(f"output {str(self.path)!r} is a directory, expected a file path")
        if self.path.parent and not self.path.parent.exists():
            raise ExtractError(f"output directory {str(self.path.parent)!r} does not exist")
        self.done: set[str] = set()
        self.truncated_bytes = 0
        if self.path.exists():
            self._recover()
        try:
            self._file = open(self.path, "ab")  # noqa: SIM115 - owned by this object
        except OSError as e:
            raise ExtractError(f"cannot write output file {str(self.path)!r}: {e}") from e

    def _recover(self) -> None:
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1  # everything after the last newline is a torn line
        lines = data[:end].split(b"\n")[:-1]
        # A crash mid-write can also leave a complete-looking but unparsable last line.
        if lines and _parse_output_line(lines[-1]) is None:
            end -= len(lines[-1]) + 1
            lines.pop()
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            obj = _parse_output_line(line)
            if obj is None:
                raise ExtractError(
                    f"output file {str(self.path)!r}, line {n}: not a result line written by this "
                    "tool (a JSON object with an 'id'); refusing to append to it. Move it away "
                    "or choose another --output."
                )
            self.done.add(record_key(obj["id"]))
        if end < len(data):
            self.truncated_bytes = len(data) - end
            with open(self.path, "r+b") as f:
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())

    def append(self, results: list[dict[str, Any]]) -> None:
        """Writes one line per result, then flush + fsync (a finished batch survives a crash)."""
        if not results:
            return
        payload = b"".join(
            json.dumps(r, ensure_ascii=False).encode("utf-8") + b"\n" for r in results
        )
        self._file.write(payload)
        self._file.flush()
        os.fsync(self._file.fileno())
        for r in results:
            self.done.add(record_key(r["id"]))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> OutputLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _parse_output_line(line: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return obj if isinstance(obj, dict) and "id" in obj else None
