"""The job across processes (`automata_jax.extract.hosts`): shares, parts, resume, merge."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from automata_jax import testing
from automata_jax.extract import ExtractError, hosts
from automata_jax.extract._io import line_digest

ROOT = Path(__file__).resolve().parents[3]


def _write_input(path: Path, n: int) -> list[bytes]:
    lines = [
        json.dumps({"id": f"r{i}", "text": f"Person {i} is {20 + i}."}).encode() for i in range(n)
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return lines


def _result(line_no: int, raw: bytes) -> bytes:
    obj = {"line": line_no, "line_sha256": line_digest(raw), "id": line_no, "ok": True}
    return json.dumps(obj).encode() + b"\n"


def test_shares_cover_every_line_once():
    for n in (1, 2, 3):
        owners = [[i for i in range(n) if hosts.in_share(line, (i, n))] for line in range(1, 20)]
        assert all(len(o) == 1 for o in owners)
    assert hosts.in_share(7, None)


def test_merge_writes_input_order_and_refuses_gaps_and_strangers(tmp_path):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = _write_input(inp, 5)
    parts = {i: hosts.part_path(out, i, 2) for i in range(2)}
    # Process 0 has lines 1, 3, 5 (written out of order, as batches may finish); 1 has 2, 4.
    parts[0].write_bytes(_result(5, lines[4]) + _result(1, lines[0]) + _result(3, lines[2]))
    parts[1].write_bytes(_result(2, lines[1]))
    with pytest.raises(ExtractError, match=r"part-1-of-2.*lacks 1 line.*input line 4"):
        hosts.merge(inp, out, 2)
    assert not out.exists()
    parts[1].write_bytes(_result(4, lines[3]) + _result(2, lines[1]))
    assert hosts.merge(inp, out, 2) == 5
    got = [json.loads(x)["line"] for x in out.read_bytes().splitlines()]
    assert got == [1, 2, 3, 4, 5]
    parts[1].write_bytes(_result(3, lines[2]) + _result(4, lines[3]) + _result(2, lines[1]))
    with pytest.raises(ExtractError, match="not process 1's share"):
        hosts.merge(inp, out, 2)
    with pytest.raises(ExtractError, match="part-0-of-3.*missing"):
        hosts.merge(inp, out, 3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _start(i: int, port: int, inp: Path, out: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'compile'}"}  # fmt: skip
    cmd = [
        sys.executable, "-m", "automata_jax.extract.hosts", "run", "--coordinator",
        f"localhost:{port}", "--num-processes", "2", "--process-id", str(i), "--",
        "--input", str(inp), "--output", str(out), "--batch-size", "1", "--max-new-tokens", "12",
        "--no-progress", "--speculate", "off", "--model", "tiny",
    ]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def test_two_processes_one_killed_and_rerun_then_merged(tmp_path):
    """Two CPU processes on one machine with a local coordinator; process 1 is killed after
    its first record (and process 0 with it, the job being down), both are rerun, each part
    resumes, the merge is in input order.

    Each process has 9 lines (batches of one), polled every 50 ms, so a loaded machine
    cannot let process 1 finish its share before the kill (with 3 lines it once did)."""
    n = 18
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    docs = testing.example_docs_path().read_bytes().splitlines()
    src = [docs[i % len(docs)].replace(b'"id": "', f'"id": "{i}-'.encode()) for i in range(n)]
    inp.write_bytes(b"\n".join(src) + b"\n")
    parts = [hosts.part_path(out, i, 2) for i in range(2)]
    logs = [tmp_path / f"log{i}.txt" for i in range(2)]
    port = _free_port()
    procs = [_start(i, port, inp, out, logs[i]) for i in range(2)]
    deadline = time.time() + 600
    while _lines(parts[1]) < 1 and time.time() < deadline and procs[1].poll() is None:
        time.sleep(0.05)
    assert _lines(parts[1]) >= 1, logs[1].read_text()
    procs[1].send_signal(signal.SIGKILL)
    procs[1].wait()
    killed_at = _lines(parts[1])
    assert killed_at < n // 2, "process 1 finished before it was killed"
    # Process 0 would finish its part, then wait on its lost peer in the shutdown barrier
    # (up to jax.distributed's own timeout): the job is down, so stop it too, wherever it is.
    procs[0].kill()
    procs[0].wait()
    port = _free_port()
    procs = [_start(i, port, inp, out, logs[i]) for i in range(2)]
    for p, log in zip(procs, logs, strict=True):
        assert p.wait(timeout=600) == 0, log.read_text()
    assert "resume:" in logs[1].read_text()
    assert hosts.merge(inp, out, 2) == n
    merged = [json.loads(x) for x in out.read_bytes().splitlines()]
    assert [m["line"] for m in merged] == list(range(1, n + 1))
    assert [m["line_sha256"] for m in merged] == [line_digest(x) for x in src]
    assert all("ok" in m for m in merged)
