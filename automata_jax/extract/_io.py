"""Input records and the resumable output file of the extraction job (`automata_jax.extract`).

Input: JSON lines, one object per line with a text field (``text`` by default)
and optionally an ``id``; a record without ``id`` is identified by its line
number. Ids are the user's and may repeat: the job keys each record on its
*line* (line number + a hash of the line's bytes, `Record.key`), never on its id.
A line that cannot be read (bad UTF-8, bad JSON, no text field) becomes a
`Record` carrying the error, so the job writes an error line for it and goes on.
`scan_input` reads the whole file once up front, so a wrong ``--text-field`` or a
file of non-objects is refused before anything is created.

Output: one JSON line per input line, appended, flushed and fsynced per batch.
Every line the job writes starts with ``{"line": N, "line_sha256": "..."`` (the
record's key): that marks the file as the job's own. `OutputLog.inspect` reads an
existing file without changing it: it refuses a file with any line the job did not
write, and finds a torn last line left by a crash; `OutputLog.open` then drops that
line and appends. Nothing finished is lost, nothing is written twice, and a user's
file is never touched.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from automata_jax._errors import ExtractError

__all__ = [
    "ExtractError",
    "InputSummary",
    "OutputLog",
    "Record",
    "line_digest",
    "read_records",
    "result_line",
    "scan_input",
]

DIGEST_FIELD = "line_sha256"
_DIGEST_CHARS = 16  # hex digits of SHA-256 kept: 64 bits, per line number
# How every line the job writes begins (`result_line` puts these two fields first).
_LINE_START_TEXT = b'{"line": '
_TORN_START = re.compile(rb'\{"line": [1-9][0-9]*, "%s": "' % DIGEST_FIELD.encode())
_LINE_START = re.compile(_TORN_START.pattern + rb'[0-9a-f]{%d}"' % _DIGEST_CHARS)


def in_share(line: int, share: tuple[int, int] | None) -> bool:
    """Whether 1-based input line ``line`` is process ``share[0]``'s (of ``share[1]``): the
    multi-host run's split of the input (`automata_jax.extract.hosts`); None = every line."""
    return share is None or (line - 1) % share[1] == share[0]


def line_digest(raw: bytes) -> str:
    """The first 16 hex digits of the SHA-256 of an input line (without its line ending)."""
    return hashlib.sha256(raw.rstrip(b"\r\n")).hexdigest()[:_DIGEST_CHARS]


@dataclasses.dataclass(frozen=True)
class Record:
    """One input line.

    Attributes:
      id: the record's ``id`` field, else its 1-based line number (ids may repeat).
      line: 1-based line number in the input file.
      digest: `line_digest` of the line's bytes.
      text: the text to extract from (None when ``error`` is set).
      error: why the line cannot be processed, or None.
    """

    id: Any
    line: int
    digest: str
    text: str | None = None
    error: str | None = None

    @property
    def key(self) -> tuple[int, str]:
        """What resume keys on: the line number and the line's hash (not the user's id)."""
        return self.line, self.digest


def result_line(record: Record, fields: dict[str, Any]) -> dict[str, Any]:
    """The output object for ``record``: its key first (the job's mark), then the id and
    ``fields`` (``ok``, ``object`` or ``error``, ...)."""
    return {"line": record.line, DIGEST_FIELD: record.digest, "id": record.id, **fields}


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
    line). A repeated ``id`` is not an error: every line is its own record.

    Raises:
      ExtractError: the file is missing, a directory, or unreadable.
    """
    for record, _ in _read(path, text_field):
        yield record


def _read(path: str | os.PathLike, text_field: str) -> Iterator[tuple[Record, Any]]:
    path = _open_input(path)
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; bytes so one bad line is one error
    except OSError as e:
        raise ExtractError(f"cannot read input file {str(path)!r}: {e.strerror or e}") from e
    with f:
        for line_no, raw in enumerate(f, start=1):
            if raw.strip():
                yield _parse_line(raw, line_no, text_field, str(path))


def _parse_line(raw: bytes, line_no: int, text_field: str, where: str) -> tuple[Record, Any]:
    """The record and the parsed JSON value (None when the line is not JSON)."""
    digest = line_digest(raw)

    def bad(msg: str, record_id: Any = line_no, obj: Any = None) -> tuple[Record, Any]:
        error = f"{where}, line {line_no}: {msg}"
        return Record(id=record_id, line=line_no, digest=digest, error=error), obj

    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        return bad(f"not valid UTF-8 (byte {e.start})")
    except json.JSONDecodeError as e:
        return bad(f"not valid JSON ({e.msg} at column {e.colno})")
    if not isinstance(obj, dict):
        return bad(f"expected a JSON object, got {type(obj).__name__}", obj=obj)
    record_id = obj.get("id", line_no)
    if isinstance(record_id, dict | list):
        return bad("'id' must be a string or a number", obj=obj)
    text = obj.get(text_field)
    if text is None:
        return bad(f"no {text_field!r} field (choose the field with --text-field)", record_id, obj)
    if not isinstance(text, str):
        return bad(
            f"field {text_field!r} is {type(text).__name__}, expected a string", record_id, obj
        )
    return Record(id=record_id, line=line_no, digest=digest, text=text), obj


@dataclasses.dataclass(frozen=True)
class InputSummary:
    """What `scan_input` found in the input file.

    Attributes:
      keys: `Record.key` of every record, in order.
      duplicate_ids: id -> the line numbers it appears on, for ids on more than one line.
    """

    keys: tuple[tuple[int, str], ...]
    duplicate_ids: dict[Any, tuple[int, ...]]


def scan_input(path: str | os.PathLike, *, text_field: str = "text") -> InputSummary:
    """Reads the whole input once, before the job creates anything.

    Raises:
      ExtractError: the file is unreadable, or no line has the text field (a typo in
        ``--text-field``; the message lists the fields that the lines do have).
    """
    keys = []
    lines_of_id: dict[str, list[int]] = collections.defaultdict(list)
    ids: dict[str, Any] = {}
    fields: collections.Counter[str] = collections.Counter()
    with_field = 0
    for record, obj in _read(path, text_field):
        keys.append(record.key)
        if isinstance(obj, dict):
            fields.update(obj.keys())
            with_field += text_field in obj
        if record.error is None:
            canon = json.dumps(record.id)  # 1, 1.0 and True stay three ids
            ids.setdefault(canon, record.id)
            lines_of_id[canon].append(record.line)
    if keys and not with_field:
        seen = ", ".join(repr(f) for f, _ in fields.most_common(20)) if fields else None
        raise ExtractError(
            f"input file {str(path)!r}: no line has a {text_field!r} field (--text-field "
            f"{text_field}); "
            + (
                f"the lines have the fields {seen}: pass the one with the text as --text-field"
                if seen
                else "no line is a JSON object"
            )
        )
    duplicates = {ids[k]: tuple(v) for k, v in lines_of_id.items() if len(v) > 1}
    return InputSummary(keys=tuple(keys), duplicate_ids=duplicates)


class OutputLog:
    """The output JSON-lines file of the job: which records are done, and appending more.

    `inspect` reads an existing file without writing to it; `open` (or ``with``) creates
    the file or opens it for appending, first dropping a torn last line of the job's.
    `append` writes whole lines, then flushes and fsyncs.

    Attributes:
      path: the output file.
      done: keys (`Record.key`) of the records already written.
      torn_bytes: size of a torn last line (a crash mid-write) that `open` drops.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.done: set[tuple[int, str]] = set()
        self.torn_bytes = 0
        self._keep = 0  # bytes of the existing file that stay
        self._file = None

    @classmethod
    def inspect(cls, path: str | os.PathLike) -> OutputLog:
        """Reads the existing output (if any); changes nothing on disk.

        Raises:
          ExtractError: the path is a directory, its folder does not exist, or the file
            has content the job did not write (the job never touches such a file).
        """
        log = cls(path)
        if log.path.is_dir():
            raise ExtractError(f"output {str(log.path)!r} is a directory, expected a file path")
        parent = log.path.parent
        if not parent.exists():
            raise ExtractError(f"output directory {str(parent)!r} does not exist")
        if log.path.exists():
            log._scan()
        return log

    def _refuse(self, where: str) -> None:
        raise ExtractError(
            f"output file {str(self.path)!r} exists and was not written by this job ({where}: "
            f'every line the job writes starts with {{"line": N, "{DIGEST_FIELD}": ...}}); '
            "refusing to change it. Choose another --output, or move the file away."
        )

    def _scan(self) -> None:
        try:
            data = self.path.read_bytes()
        except OSError as e:
            raise ExtractError(f"cannot read output file {str(self.path)!r}: {e}") from e
        end = data.rfind(b"\n") + 1
        lines = data[:end].split(b"\n")[:-1]
        tail = data[end:]  # no newline after it: a torn write, or a foreign file
        for n, line in enumerate(lines, start=1):
            key = _job_key(line)
            if key is None:
                # A crash can also leave a newline-terminated but unparsable last line
                # (e.g. zero-filled blocks); only one that starts like the job's may go.
                last = n == len(lines) and not tail
                if last and _TORN_START.match(line) and not _is_json(line):
                    tail, end = line + b"\n", end - len(line) - 1
                    break
                self._refuse(f"line {n}")
            self.done.add(key)
        if tail:
            # Ours only if it starts as every job line does: in full, or (after lines of
            # the job's) cut short within that start.
            # A whole JSON value is not a torn write (that leaves a prefix of a job line).
            cut_short = self.done and _LINE_START_TEXT.startswith(tail[: len(_LINE_START_TEXT)])
            torn = not _is_json(tail) and (_TORN_START.match(tail) or cut_short)
            if _job_key(tail) is None and not torn:
                self._refuse(f"line {len(lines) + 1}")
            self.torn_bytes = len(tail)
        self._keep = end

    def open(self) -> OutputLog:
        """Creates the file, or drops a torn last line and opens it for appending."""
        try:
            if self.torn_bytes:
                with open(self.path, "r+b") as f:
                    f.truncate(self._keep)
                    f.flush()
                    os.fsync(f.fileno())
            self._file = open(self.path, "ab")  # noqa: SIM115 - owned by this object
        except OSError as e:
            raise ExtractError(f"cannot write output file {str(self.path)!r}: {e}") from e
        return self

    def append(self, results: list[dict[str, Any]]) -> None:
        """Writes one line per result (`result_line` objects), then flush + fsync (a finished
        batch survives a crash)."""
        if not results:
            return
        payload = b"".join(
            json.dumps(r, ensure_ascii=False).encode("utf-8") + b"\n" for r in results
        )
        self._file.write(payload)
        self._file.flush()
        os.fsync(self._file.fileno())
        for r in results:
            self.done.add((r["line"], r[DIGEST_FIELD]))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> OutputLog:
        return self if self._file is not None else self.open()

    def __exit__(self, *exc) -> None:
        self.close()


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return True


def _job_key(line: bytes) -> tuple[int, str] | None:
    """The key of a complete line the job wrote, else None."""
    if not _LINE_START.match(line):
        return None
    try:
        obj = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    line_no, digest = obj["line"], obj[DIGEST_FIELD]  # an object: the line starts with '{'
    if not (isinstance(line_no, int) and isinstance(digest, str)):
        return None
    return line_no, digest
