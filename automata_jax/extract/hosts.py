"""The extraction job across hosts: one process per host, each with its share of the input.

As on a TPU pod slice, the same command runs on every host with ``jax.distributed``
(``--coordinator HOST:PORT --num-processes N --process-id I``; on a pod the three are
found from the environment when left out). Process ``I`` takes the input lines whose
1-based number ``n`` has ``(n - 1) % N == I`` and decodes them on its own (local)
devices into its own part, ``OUTPUT.part-I-of-N``: the job's resumable output file, so
each part resumes on its own when its process is rerun (a killed process loses at most
its unfinished batch). ``merge`` then checks that every input line is in exactly one
part and writes ``OUTPUT`` in input order (atomically, through a temporary file)::

    python -m automata_jax.extract.hosts run --coordinator localhost:1234 \\
        --num-processes 2 --process-id 0 -- --input docs.jsonl --output out.jsonl
    (same with --process-id 1, on the other host)
    python -m automata_jax.extract.hosts merge --num-processes 2 \\
        --input docs.jsonl --output out.jsonl

Every job option after ``--`` is the single-host job's (`automata_jax.extract`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from automata_jax._errors import ExtractError
from automata_jax.extract._io import OutputLog, in_share, scan_input

__all__ = ["in_share", "main", "merge", "part_path"]


def part_path(output: str | os.PathLike, process_id: int, num_processes: int) -> Path:
    """Where process ``process_id`` of ``num_processes`` writes its part of ``output``."""
    return Path(f"{output}.part-{process_id}-of-{num_processes}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m automata_jax.extract.hosts", description=__doc__.splitlines()[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run this process's share of the job")
    run.add_argument("--coordinator", default=None, help="HOST:PORT of process 0's service")
    run.add_argument("--num-processes", type=int, default=None)
    run.add_argument("--process-id", type=int, default=None)
    run.add_argument("job", nargs=argparse.REMAINDER, help="-- then the job's options")
    merge = sub.add_parser("merge", help="merge the parts into one output, in input order")
    merge.add_argument("--num-processes", type=int, required=True)
    merge.add_argument("--input", required=True)
    merge.add_argument("--output", required=True)
    merge.add_argument("--text-field", default="text")
    args = p.parse_args(argv)
    n, i = args.num_processes, getattr(args, "process_id", None)
    if n is not None and n < 1:
        p.error(f"--num-processes: expected >= 1, got {n}")
    if i is not None and n is not None and not 0 <= i < n:
        p.error(f"--process-id: expected 0..{n - 1}, got {i}")
    if args.command == "run":
        args.job = args.job[1:] if args.job[:1] == ["--"] else args.job
    return args


def main(argv: list[str] | None = None) -> int:
    """Runs ``run`` or ``merge``; returns the exit status (0 done, 2 bad input)."""
    args = parse_args(argv)
    if args.command == "merge":
        try:
            merge(args.input, args.output, args.num_processes, text_field=args.text_field)
        except (ExtractError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    return run(args)


def run(args: argparse.Namespace) -> int:
    """This process's share: ``jax.distributed`` is initialized, then the job runs on the
    local devices with its share of the lines and its own part as output."""
    import jax

    from automata_compile import plain_warnings
    from automata_jax.extract import _job

    job = _job.parse_args(args.job)
    kwargs = {}
    if args.coordinator is not None:
        kwargs["coordinator_address"] = args.coordinator
    if args.num_processes is not None:
        kwargs["num_processes"] = args.num_processes
    if args.process_id is not None:
        kwargs["process_id"] = args.process_id
    jax.distributed.initialize(**kwargs)
    i, n = jax.process_index(), jax.process_count()
    job.share = (i, n)
    job.output = str(part_path(job.output, i, n))
    print(f"process {i} of {n}: lines n with (n - 1) % {n} == {i} -> {job.output}", file=sys.stderr)
    with plain_warnings():
        return _job._main(job)


def merge(
    input_path: str | os.PathLike,
    output: str | os.PathLike,
    num_processes: int,
    *,
    text_field: str = "text",
) -> int:
    """Writes ``output`` from the parts, one line per input line, in input order.

    Returns:
      The number of lines written.

    Raises:
      ExtractError: a part is missing or unfinished (names the part and the first missing
        line), a part holds a line of another process's share or of another input, or
        ``output`` exists and is not the job's own file.
    """
    summary = scan_input(input_path, text_field=text_field)
    want = {key: None for key in sorted(summary.keys)}
    OutputLog.inspect(output)  # refuses a file the job did not write
    for i in range(num_processes):
        path = part_path(output, i, num_processes)
        if not path.is_file():
            raise ExtractError(f"part {str(path)!r} is missing: run process {i} (it resumes)")
        log = OutputLog.inspect(path)
        if log.torn_bytes:
            raise ExtractError(f"part {str(path)!r} ends in a torn line: rerun process {i}")
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                obj = json.loads(raw)
                key = (obj["line"], obj["line_sha256"])
                if key not in want or not in_share(key[0], (i, num_processes)):
                    raise ExtractError(
                        f"{path}:{number}: input line {key[0]} is not process {i}'s share of "
                        f"{str(input_path)!r} (another input, or another --num-processes)"
                    )
                want[key] = raw if raw.endswith(b"\n") else raw + b"\n"
        missing = [k for k, v in want.items() if v is None and in_share(k[0], (i, num_processes))]
        if missing:
            raise ExtractError(
                f"part {str(path)!r} lacks {len(missing)} line(s), the first is input line "
                f"{missing[0][0]}: rerun process {i} (it resumes)"
            )
    tmp = Path(f"{output}.merging")
    with open(tmp, "wb") as f:
        for raw in want.values():
            f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, output)
    return len(want)


if __name__ == "__main__":
    sys.exit(main())
