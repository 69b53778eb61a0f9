"""The extraction job (`python -m automata_jax.extract`) with the tiny random-weight model.

Every job here uses batch size 4 and the bundled schema, so the decode loop is
compiled once per process and shared by the in-process runs. The job's default model is the
real Gemma-3 270M; these tests make ``tiny`` the default (`_tiny_by_default`) and the
subprocess ones pass ``--model tiny``. `test_real_model_job` runs two records on the real one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from automata_jax import extract, testing
from automata_jax.extract import _job
from automata_jax.extract._io import OutputLog, line_digest, read_records
from automata_jax.models import Gemma3

jsonschema = pytest.importorskip("jsonschema")

BATCH = ["--batch-size", "4", "--no-progress"]


@pytest.fixture(autouse=True)
def _tiny_by_default(monkeypatch):
    monkeypatch.setattr(_job, "DEFAULT_MODEL", "tiny")


def _docs(path: Path, n: int, *, extra_lines: dict[int, str] | None = None) -> list[str]:
    """Writes ``n`` documents (ids d0..d{n-1}), with raw ``extra_lines`` inserted at given
    0-based positions; returns every line written."""
    base = [json.loads(x) for x in testing.example_docs_path().read_text().splitlines()]
    lines = [json.dumps({"id": f"d{i}", "text": base[i % len(base)]["text"]}) for i in range(n)]
    for pos, raw in sorted((extra_lines or {}).items()):
        lines.insert(pos, raw)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


def _read_output(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _check_results(results: list[dict], schema: dict) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    for r in results:
        assert set(r) >= {"id", "line", "ok"}
        if r["ok"]:
            validator.validate(r["object"])  # every object is an instance of the schema
        else:
            assert isinstance(r["error"], str) and r["error"]


# -- input and output files ------------------------------------------------------------------


def test_read_records_reports_bad_lines_with_line_numbers(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(
        b'{"id": 7, "text": "fine"}\n'
        b"\n"
        b'{"text": "no id: the line number is the id"}\n'
        b"{not json\n"
        b'["a list"]\n'
        b'{"id": "x", "body": "no text field"}\n'
        b'{"id": 7, "text": "duplicate id"}\r\n'
        b'{"text": "bad utf-8 \xff"}\n'
    )
    records = list(read_records(path))
    assert [(r.id, r.line) for r in records] == [
        (7, 1), (3, 3), (4, 4), (5, 5), ("x", 6), (7, 7), (8, 8),
    ]  # fmt: skip
    assert records[0].text == "fine" and records[0].error is None
    assert records[1].error is None
    # A repeated id is not an error: each line is its own record, keyed on the line.
    assert records[5].text == "duplicate id" and records[5].error is None
    assert records[5].key == (7, line_digest(b'{"id": 7, "text": "duplicate id"}'))
    assert records[0].key != records[5].key
    for r, words in zip(
        records[2:5] + records[6:],
        ["line 4: not valid JSON", "line 5: expected a JSON object", "line 6: no 'text' field",
         "line 8: not valid UTF-8"],
        strict=True,
    ):  # fmt: skip
        assert r.text is None and words in r.error


def _job_line(line: int, record_id, raw: bytes | None = None, **fields) -> bytes:
    digest = line_digest(raw if raw is not None else f"input line {line}".encode())
    obj = {"line": line, "line_sha256": digest, "id": record_id, "ok": True, **fields}
    return json.dumps(obj).encode() + b"\n"


def test_output_log_drops_a_torn_last_line_of_its_own(tmp_path):
    path = tmp_path / "out.jsonl"
    good = _job_line(1, "a") + _job_line(2, "b", ok=False, error="x")
    for torn in (_job_line(3, "c")[:30], _job_line(3, "c")[:4], _job_line(3, "c")[:-1]):
        path.write_bytes(good + torn)
        log = OutputLog.inspect(path)
        assert log.torn_bytes == len(torn) and path.read_bytes() == good + torn  # not yet
        assert log.done == {(1, line_digest(b"input line 1")), (2, line_digest(b"input line 2"))}
        with log.open():
            assert log.torn_bytes == len(torn)
            log.append([json.loads(_job_line(3, "c"))])
        assert path.read_bytes() == good + _job_line(3, "c")
    # A crash in the very first write of a new file: the line's start is the job's mark.
    path.write_bytes(_job_line(1, "a")[:40])
    with OutputLog.inspect(path) as log:
        assert log.torn_bytes == 40 and not log.done
    assert path.read_bytes() == b""


@pytest.mark.parametrize(
    "content",
    [
        b"my precious notes\n",
        b"my precious notes",  # no newline: still not a torn line of the job's
        b'{"id": "d0", "text": "an input file given as --output"}\n',
        b'{"line": 1, "text": "looks a bit like ours"}',
        b'{"line": 1, "line_sha256": "not ours"}',  # whole JSON: not a torn write
        _job_line(1, "a") + b"a line the user added\n" + _job_line(2, "b"),
        _job_line(1, "a") + b"notes appended by hand",
        b"\n\n",
    ],
)
def test_output_log_refuses_a_file_it_did_not_write(tmp_path, content):
    path = tmp_path / "out.jsonl"
    path.write_bytes(content)
    with pytest.raises(extract.ExtractError, match="was not written by this job") as e:
        OutputLog.inspect(path)
    assert "Choose another --output" in str(e.value)
    assert path.read_bytes() == content


def test_output_log_refusal_names_the_foreign_line(tmp_path):
    path = tmp_path / "out.jsonl"
    for foreign in (b'{"line": 2, "line_sha256": "not ours"}\n', b"notes\n", b"notes"):
        path.write_bytes(_job_line(1, "a") + foreign)
        with pytest.raises(extract.ExtractError, match=r"\(line 2: "):
            OutputLog.inspect(path)


# -- the job ---------------------------------------------------------------------------------


def test_job_writes_one_valid_line_per_input_and_reports_bad_lines(tmp_path, capsys):
    inp, out = tmp_path / "docs.jsonl", tmp_path / "people.jsonl"
    _docs(inp, 6, extra_lines={2: "{this is not json", 5: '{"id": "no-text", "txt": "typo"}'})
    assert extract.main(["--input", str(inp), "--output", str(out), *BATCH]) == 0
    err = capsys.readouterr().err
    assert "records/s" in err and "tokens/s" in err and "RANDOM weights" in err

    results = _read_output(out)
    assert [r["line"] for r in results] == list(range(1, 9))  # input order, one line each
    assert results[2] == {
        "line": 3,
        "line_sha256": line_digest(b"{this is not json"),
        "id": 3,
        "ok": False,
        "error": f"{inp}, line 3: not valid JSON (Expecting property name enclosed in double "
        "quotes at column 2)",
    }
    assert results[5]["id"] == "no-text" and "line 6: no 'text' field" in results[5]["error"]
    good = [r for i, r in enumerate(results) if i not in (2, 5)]
    assert [r["id"] for r in good] == [f"d{i}" for i in range(6)]
    assert sum(r["ok"] for r in good) >= 4  # random text, bounded strings: most complete
    for r in good:
        assert r["ok"] or r["error"] == extract.LIMIT_ERROR
    _check_results(results, testing.example_schema())

    # The compiled tables were cached next to the output; a rerun has nothing to do.
    assert list((tmp_path / ".automata_cache").glob("person-*.npz"))
    assert extract.main(["--input", str(inp), "--output", str(out), *BATCH]) == 0
    err = capsys.readouterr().err
    assert "8 record(s) already in" in err and "nothing to do" in err
    assert _read_output(out) == results


def test_resume_after_a_torn_write_loses_and_duplicates_nothing(tmp_path, capsys):
    inp, out = tmp_path / "docs.jsonl", tmp_path / "out.jsonl"
    _docs(inp, 6)
    assert extract.main(["--input", str(inp), "--output", str(out), *BATCH]) == 0
    full = out.read_bytes()
    lines = full.splitlines(keepends=True)
    # A crash in the second batch: one batch (4 lines) on disk, then half a line.
    out.write_bytes(b"".join(lines[:4]) + lines[4][: len(lines[4]) // 2])
    assert extract.main(["--input", str(inp), "--output", str(out), *BATCH]) == 0
    err = capsys.readouterr().err
    assert "dropped a torn last line" in err and "4 record(s) already in" in err
    resumed = out.read_bytes()
    assert resumed.startswith(b"".join(lines[:4]))  # finished records untouched
    ids = [r["id"] for r in _read_output(out)]
    assert ids == [f"d{i}" for i in range(6)]  # nothing lost, nothing twice
    assert resumed == full  # greedy decoding: the redone records come out the same
    _check_results(_read_output(out), testing.example_schema())


def test_killed_job_resumes_without_loss_or_duplicates(tmp_path):
    inp, out = tmp_path / "docs.jsonl", tmp_path / "out.jsonl"
    n = 12
    _docs(inp, n)
    cmd = [sys.executable, "-m", "automata_jax.extract", "--input", str(inp), "--output",
           str(out), "--model", "tiny", *BATCH]  # fmt: skip
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Generous: the wait ends at the first batch (seconds idle; 90 s ran out once at load 7).
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and out.read_bytes().count(b"\n") >= 4:  # one batch done
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    before = out.read_bytes()
    assert before.count(b"\n") >= 4, proc.stderr.read().decode()
    done_before = before.count(b"\n")

    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    results = _read_output(out)
    assert out.read_bytes().startswith(before[: before.rfind(b"\n") + 1])
    assert sorted(r["id"] for r in results) == sorted(f"d{i}" for i in range(n))
    assert len(results) == n
    if done_before < n:
        assert f"{done_before} record(s) already in" in rerun.stderr
    _check_results(results, testing.example_schema())


# -- clear errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema_text, message",
    [
        ('{"type": "object",\n "properties": {"a": }}', "line 2, column 22: not valid JSON"),
        ('"a string"', "a JSON Schema is an object or a boolean"),
        ('{"type": "strng"}', "invalid JSON Schema at /type"),
        ('{"type": "object", "minProperties": -1}', "invalid JSON Schema at /minProperties"),
    ],
)
def test_invalid_schema_is_a_clear_error(tmp_path, capsys, schema_text, message):
    schema = tmp_path / "bad.json"
    schema.write_text(schema_text)
    out = tmp_path / "out.jsonl"
    assert extract.main(["--schema", str(schema), "--output", str(out), *BATCH]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(schema) in err and message in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]  # nothing created


# refused: distinct integers, at least two (the sound subset, at most one item, is empty)
UNIQUE_ITEMS = (
    '{"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3, '
    '"uniqueItems": true}'
)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--schema", "{tmp}/unique.json"], "uniqueItems"),
        (["--tokenizer", "{tmp}/absent.model"], "absent.model"),
        (["--model", "gemma3-1b", "--checkpoint", "{tmp}/no-ckpt"], "does not exist"),
        (["--model", "gemma3-1b", "--checkpoint", "{tmp}/empty"], "pass --tokenizer PATH"),
        (["--prompt-template", "{tmp}/absent.txt"], "cannot read prompt template"),
    ],
)
def test_a_failed_start_creates_nothing(tmp_path, capsys, argv, message):
    """Schema, input, template, tokenizer and model are all checked before the output file
    (or the cache) is created: a refusal leaves the folder as it was."""
    (tmp_path / "unique.json").write_text(UNIQUE_ITEMS)
    (tmp_path / "empty").mkdir()
    before = sorted(tmp_path.iterdir())
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert extract.main([*argv, "--output", str(tmp_path / "o.jsonl"), *BATCH]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert sorted(tmp_path.iterdir()) == before


def test_refusals_and_warnings_name_the_job_flag(tmp_path, capsys):
    """The job's knob is --lenient (not the Python API's strict=False), and a dropped keyword
    is a plain 'warning: ...' line, not a Python UserWarning with a source path."""
    schema = tmp_path / "unique.json"
    schema.write_text(UNIQUE_ITEMS)
    inp, out = tmp_path / "docs.jsonl", tmp_path / "o.jsonl"
    _docs(inp, 2)
    args = ["--schema", str(schema), "--input", str(inp), "--output", str(out), *BATCH]
    assert extract.main(args) == 2
    err = capsys.readouterr().err
    assert "Pass --lenient to drop it" in err and "strict=False" not in err
    assert extract.main([*args, "--lenient", "--max-new-tokens", "16"]) == 0
    err = capsys.readouterr().err
    warning = "warning: 'uniqueItems' at #/uniqueItems is not enforced"
    assert any(line.startswith(warning) for line in err.splitlines()), err
    assert "UserWarning" not in err and ".py:" not in err and "strict=" not in err
    assert len(_read_output(out)) == 2
    # Another output in the same folder loads the cached tables, and still warns.
    again = [*args[:5], str(tmp_path / "again.jsonl"), *BATCH, "--lenient"]
    assert extract.main([*again, "--max-new-tokens", "16"]) == 0
    err = capsys.readouterr().err
    assert "loaded from" in err
    assert any(line.startswith(warning) for line in err.splitlines()), err


def test_duplicate_ids_are_kept_with_a_warning(tmp_path, capsys):
    """The bundled docs repeated 10 times: 80 output lines (one per input line, in order),
    a warning about the repeated ids, and a resume that follows lines, not ids."""
    inp, out = tmp_path / "docs.jsonl", tmp_path / "out.jsonl"
    docs = testing.example_docs_path().read_bytes()
    n_docs = len(docs.splitlines())
    inp.write_bytes(docs * 10)
    args = ["--input", str(inp), "--output", str(out), "--max-new-tokens", "8", *BATCH]
    assert extract.main(args) == 0
    err = capsys.readouterr().err
    assert f"warning: {n_docs} id(s) appear on more than one input line" in err
    assert f"done: {10 * n_docs} record(s)" in err
    results = _read_output(out)
    assert [r["line"] for r in results] == list(range(1, 10 * n_docs + 1))
    first_ids = [json.loads(x)["id"] for x in docs.splitlines()]
    assert [r["id"] for r in results] == first_ids * 10
    # A crash after half the lines: the rerun does the other half, ids notwithstanding.
    full = out.read_bytes()
    half = b"".join(full.splitlines(keepends=True)[: 5 * n_docs])
    out.write_bytes(half)
    assert extract.main(args) == 0
    assert f"{5 * n_docs} record(s) already in" in capsys.readouterr().err
    assert out.read_bytes() == full


def test_the_job_never_changes_a_file_it_did_not_write(tmp_path, capsys):
    inp, notes = tmp_path / "docs.jsonl", tmp_path / "notes.txt"
    _docs(inp, 2)
    for content in (b"my precious notes\n", b"my precious notes", inp.read_bytes()):
        notes.write_bytes(content)
        assert extract.main(["--input", str(inp), "--output", str(notes), *BATCH]) == 2
        err = capsys.readouterr().err
        assert "was not written by this job" in err and "Choose another --output" in err
        assert notes.read_bytes() == content
    assert not (tmp_path / ".automata_cache").exists()


def test_a_text_field_no_line_has_exits_2_naming_the_fields_seen(tmp_path, capsys):
    inp, out = tmp_path / "docs.jsonl", tmp_path / "out.jsonl"
    _docs(inp, 3, extra_lines={1: "{not json"})
    assert extract.main(["--input", str(inp), "--output", str(out), "--text-field", "txt"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no line has a 'txt' field" in err
    assert "'id', 'text'" in err and "--text-field" in err
    assert not out.exists()
    # Some lines without the field are per-line errors, as before (not a refusal).
    _docs(inp, 2, extra_lines={1: '{"id": "x", "body": "no text"}'})
    assert extract.main(["--input", str(inp), "--output", str(out), *BATCH]) == 0
    assert [r["ok"] for r in _read_output(out)][1] is False


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--input", "/nonexistent/docs.jsonl"], "input file '/nonexistent/docs.jsonl' does not exist"),
        (["--prompt-template", "{tmp}/t.txt"], "has no {text} placeholder"),
        (["--output", "{tmp}"], "is a directory"),
    ],
)  # fmt: skip
def test_bad_files_are_clear_errors(tmp_path, capsys, argv, message):
    (tmp_path / "t.txt").write_text("no placeholder here")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if "--output" not in argv:
        argv += ["--output", str(tmp_path / "o.jsonl")]
    assert extract.main(argv + BATCH) == 2
    assert message in capsys.readouterr().err


def test_bad_options_exit_with_usage(capsys):
    for argv in (["--output", "o", "--batch-size", "0"], ["--output", "o", "--model", "gemma3-1b"]):
        with pytest.raises(SystemExit) as e:
            extract.parse_args(argv)
        assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--batch-size: expected >= 1, got 0" in err and "needs --checkpoint" in err


# -- limits, real-checkpoint path, prompts ---------------------------------------------------


def test_token_limit_gives_a_clear_error_line(tmp_path):
    inp, out = tmp_path / "docs.jsonl", tmp_path / "out.jsonl"
    _docs(inp, 2)
    args = ["--input", str(inp), "--output", str(out), "--max-new-tokens", "8", *BATCH]
    assert extract.main(args) == 0
    for r in _read_output(out):
        assert r == {"id": r["id"], "line": r["line"], "line_sha256": r["line_sha256"],
                     "ok": False, "tokens": 8, "error": "max_new_tokens reached before the object was complete",
                     "text": r["text"]}  # fmt: skip
        assert r["text"].startswith('{"name":"')  # the text so far, where it ran long


def test_gemma_checkpoint_with_its_own_tokenizer_and_chat_template(tmp_path, gemma3_tokenizer_path):
    """The --checkpoint path: HF config.json + safetensors + tokenizer.json (262,145 ids for a
    262,144-wide model), the Gemma chat template, and schema-valid output."""
    pytest.importorskip("safetensors")
    from automata_jax.models import Gemma3Config

    config = Gemma3Config(
        vocab_size=262_144, d_model=8, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=4,
        hidden_dim=16, sliding_window=16, query_pre_attn_scalar=4.0,
    )  # fmt: skip
    ckpt = testing.write_random_checkpoint(
        tmp_path / "ckpt", config, tokenizer=gemma3_tokenizer_path
    )
    inp, out = tmp_path / "docs.jsonl", tmp_path / "out.jsonl"
    _docs(inp, 2)
    args = ["--model", "gemma3-270m", "--checkpoint", str(ckpt), "--input", str(inp),
            "--output", str(out), "--batch-size", "2", "--max-new-tokens", "128", "--no-progress"]  # fmt: skip
    assert extract.main(args) == 0
    results = _read_output(out)
    assert [r["id"] for r in results] == ["d0", "d1"] and any(r["ok"] for r in results)
    _check_results(results, testing.example_schema())


def test_prompt_template_special_tokens_only_from_the_template(gemma3_vocab):
    from automata_jax.extract._prep import PromptTemplate

    template = PromptTemplate.from_file(testing.data_path("prompt_gemma.txt"))
    text = "Eve <start_of_turn> 30"
    ids = template.encode(gemma3_vocab, text=text, schema_json="{}", record_id=1)
    start = gemma3_vocab.special_tokens["<start_of_turn>"]
    end = gemma3_vocab.special_tokens["<end_of_turn>"]
    assert ids[0] == gemma3_vocab.bos_id
    assert ids.count(start) == 2 and ids.count(end) == 1  # the template's, not the text's
    decoded = gemma3_vocab.decode(ids).decode()
    assert text in decoded and "{text}" not in decoded and "{schema}" not in decoded


def test_result_lines_check_objects_against_the_schema():
    """What is written for a row: the object, the token-limit error, or (only possible with
    --lenient, which drops unenforceable keywords) a validation error naming the place."""
    from automata_compile import Vocabulary
    from automata_jax.extract._prep import schema_validator
    from automata_jax.extract._run import RowOutput

    vocab = Vocabulary.from_bytes([b"[", b"]", b"0", b",", None], eos_ids=[4])
    validator = schema_validator({"type": "array", "uniqueItems": True})
    done = RowOutput(tokens=(0, 2, 3, 2, 1), num_tokens=6, finished=True)
    assert _job._result(done, vocab, validator) == {
        "ok": False,
        "error": "object does not validate: [0, 0] has non-unique elements at /",
        "text": "[0,0]",
    }
    good = RowOutput(tokens=(0, 2, 1), num_tokens=4, finished=True)
    assert _job._result(good, vocab, validator) == {"ok": True, "object": [0], "tokens": 4}
    cut = RowOutput(tokens=(0, 2), num_tokens=2, finished=False)
    assert _job._result(cut, vocab, validator) == {
        "ok": False,
        "error": extract.LIMIT_ERROR,
        "tokens": 2,
        "text": "[0",  # where it ran long
    }


def test_compile_timeout_is_a_clear_error(tmp_path, capsys):
    """--compile-timeout bounds the schema compile: a timeout that has passed at the first
    checkpoint exits 2 with an error line naming the limit; no output, no spinner on a pipe."""
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}}))
    inp, out = tmp_path / "docs.jsonl", tmp_path / "o.jsonl"
    _docs(inp, 1)
    args = ["--schema", str(schema), "--input", str(inp), "--output", str(out), "--no-cache"]
    assert extract.main([*args, "--compile-timeout", "1e-9", *BATCH]) == 2
    err = capsys.readouterr().err
    assert "error: compiling the schema ran past timeout_s=1e-09 s" in err and "..." not in err
    assert not out.exists() or out.read_text() == ""


# -- prompts for a real model, the shared prompt prefix, the real model end to end ------------


def test_schema_fields_show_names_and_types_only():
    from automata_jax.extract._prep import schema_fields

    assert schema_fields(testing.example_schema()) == (
        "name (string), age (integer), occupation (string), city (string)"
    )
    assert schema_fields({"properties": {"a": {"type": ["string", "null"]}, "b": {}}}) == (
        "a (string or null), b"
    )
    assert schema_fields({"type": "array"}) == "the JSON value"


GEMMA_CHAT = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n"
    "{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def test_chat_prompt_keeps_the_placeholders(gemma3_vocab):
    from automata_jax.extract import ExtractError
    from automata_jax.extract._prep import PromptTemplate, chat_prompt

    source = chat_prompt(GEMMA_CHAT, "Extract {fields}.\n\nText: {text}")
    assert (
        source
        == "<start_of_turn>user\nExtract {fields}.\n\nText: {text}<end_of_turn>\n<start_of_turn>model\n"
    )
    ids = PromptTemplate(source).encode(
        gemma3_vocab, text="Ann, 3", schema_json="", record_id=1, fields="name (string)"
    )
    assert ids[:2] == [gemma3_vocab.bos_id, gemma3_vocab.special_tokens["<start_of_turn>"]]
    assert gemma3_vocab.decode(ids).endswith(b"Text: Ann, 3\nmodel\n")
    with pytest.raises(ExtractError, match="does not render: no system"):
        chat_prompt("{{ raise_exception('no system') }}", "x")


def _gguf_with_chat_template(path: Path, chat: str | None) -> Path:
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), "gemma3")
    if chat is not None:
        w.add_string("tokenizer.chat_template", chat)
    w.add_tensor("t", __import__("numpy").zeros(4, "float32"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_default_prompt_per_model(tmp_path):
    """tiny: the plain prompt; a GGUF with a chat template: that template around the bundled
    user message; a base GGUF: few-shot examples for the bundled schema, field names else;
    --prompt-template overrides all; no default shows the schema's annotations."""
    schema = testing.example_schema()
    other = {"type": "object", "properties": {"title": {"type": "string"}}}

    def template(*argv, schema=schema):
        argv = ["--model", "gemma3-270m", *argv, "--output", "o"]
        return _job._prompt_template(extract.parse_args(argv), schema)

    assert _job._prompt_template(extract.parse_args(["--output", "o"]), schema).name == (
        "prompt.txt"  # tiny
    )
    chat = _gguf_with_chat_template(tmp_path / "it.gguf", GEMMA_CHAT)
    t = template("--checkpoint", str(chat))
    assert t.name == "chat template of it.gguf" and t.source.startswith("<start_of_turn>user\n")
    assert "{fields}" in t.source and "{schema}" not in t.source
    base = _gguf_with_chat_template(tmp_path / "pt.gguf", None)
    assert template("--checkpoint", str(base)).name == "prompt_base.txt"
    assert template("--checkpoint", str(base), schema=other).name == "prompt_base_generic.txt"
    (tmp_path / "mine.txt").write_text("{text}")
    assert (
        template("--checkpoint", str(chat), "--prompt-template", str(tmp_path / "mine.txt")).source
        == "{text}"
    )
    for name in ("prompt_base.txt", "prompt_base_generic.txt", "prompt_gemma.txt"):
        source = testing.data_path(name).read_text()
        assert "{schema}" not in source and "130" not in source and "Person" not in source


def test_prompt_prefix_is_run_once_and_gives_the_same_tokens(tmp_path):
    """`Runner.set_prefix`: prompts that start with the template's shared prefix feed only
    their rest, from a cache holding the prefix; the tokens are those of the full prefill."""
    from automata_compile import compile_json_schema
    from automata_jax.extract import _run
    from automata_jax.extract._prep import PromptTemplate

    args = extract.parse_args(["--model", "tiny", "--output", "o", "--batch-size", "2"])
    vocab = _run.load_vocabulary(args)
    runner = _run.Runner.create(args, vocab)
    runner.set_constraint(
        compile_json_schema(testing.example_schema(), vocab, **extract.SCHEMA_OPTIONS)
    )
    template = PromptTemplate(
        "Here are some instructions to read first, then two short examples.\n"
        "One example. Another example.\n\nText: {text}\nJSON:\n"
    )
    prompts = [
        template.encode(vocab, text=t, schema_json="", record_id=0) for t in ("Ann, 31", "Bo is 7")
    ]
    full = runner.generate(prompts)
    prefix = template.prefix_ids(vocab)
    assert len(prefix) >= _run.MIN_PREFIX and all(p[: len(prefix)] == prefix for p in prompts)
    runner.set_prefix(prefix)
    assert runner.prefix == tuple(prefix)
    # The prefix step declares what the model's step declares (`logits_at`, and the cache
    # written after the loops' switch over call widths).
    from automata_jax._fast_forward import accepts_logits_at
    from automata_jax._loop import defers_cache_write

    step = _run._PrefixStep(runner.model, len(prefix))
    assert accepts_logits_at(step)
    assert defers_cache_write(step, runner) == defers_cache_write(runner.model.apply_step, runner)
    assert defers_cache_write(step, runner) == isinstance(runner.model, Gemma3)
    again = runner.generate(prompts)
    assert [o.tokens for o in again] == [o.tokens for o in full]
    assert [o.model_calls for o in again] == [o.model_calls for o in full]
    # A prompt without the prefix takes the full path.
    assert runner.generate([[vocab.bos_id, *vocab.encode("Cy, 5")]])[0].num_tokens > 0


def test_real_model_job(tmp_path, capsys, gemma3_gguf_path):
    """Two records end to end on Gemma-3 270M (default model, weights package): valid objects
    (no accuracy assertion) and the time breakdown."""
    inp, out = tmp_path / "docs.jsonl", tmp_path / "out.jsonl"
    _docs(inp, 2)
    args = ["--model", "gemma3-270m", "--input", str(inp), "--output", str(out),
            "--batch-size", "2", "--max-new-tokens", "40", "--no-progress"]  # fmt: skip
    assert extract.main(args) == 0
    results = _read_output(out)
    assert [r["id"] for r in results] == ["d0", "d1"]
    assert all(r["ok"] for r in results), results
    _check_results(results, testing.example_schema())
    err = capsys.readouterr().err
    assert "prompt: prompt_base.txt" in err and "time: load" in err and "XLA compile" in err


def test_speculation_gives_the_same_records_and_reports_drafts(tmp_path, capsys):
    """--speculate on (drafts verified in the loop) writes what --speculate off writes
    (greedy), and the summary reports drafted and accepted tokens per model call. With
    --call-costs the runner speculates under those costs (not a third decode loop: that
    the runner's ``speculate`` reaches the loop is the "on" run, that measured costs keep
    greedy outputs is test_speculative's test_logit_slots_and_measured_costs_keep_greedy_outputs);
    costs the policy refuses are a --call-costs error."""
    from automata_jax import Speculate
    from automata_jax.extract import _run

    inp = tmp_path / "docs.jsonl"
    _docs(inp, 4)
    outs = {}
    for mode in ("off", "on"):
        outs[mode] = tmp_path / f"{mode}.jsonl"
        args = ["--input", str(inp), "--output", str(outs[mode]), "--speculate", mode, *BATCH]
        assert extract.main(args) == 0
        err = capsys.readouterr().err
        assert ("tokens per model call" in err) == (mode == "on"), err
    assert _read_output(outs["on"]) == _read_output(outs["off"])
    # The device's measured call costs (benchmarks/speculative_costs.py's JSON).
    costs = tmp_path / "costs.json"
    table = [[1, 1, 1.0], [4, 1, 1.01], [16, 5, 1.02]]
    costs.write_text(json.dumps({"call_costs": table}))
    out = tmp_path / "costs.jsonl"
    args = ["--input", str(inp), "--output", str(out), "--speculate", "on", *BATCH]
    parsed = _job.parse_args([*args, "--call-costs", str(costs)])
    runner = _run.Runner.create(parsed, _run.load_vocabulary(parsed))
    assert runner.speculate == Speculate(call_costs=tuple(map(tuple, table)))
    parsed = _job.parse_args([*args, "--speculate", "off", "--call-costs", str(costs)])
    assert _run.Runner.create(parsed, _run.load_vocabulary(parsed)).speculate is False
    costs.write_text(json.dumps({"call_costs": [[2, 3, 1.0]]}))  # 3 logit slots in a 2-wide call
    bad = tmp_path / "bad.jsonl"
    args = ["--input", str(inp), "--output", str(bad), "--speculate", "on", *BATCH]
    assert extract.main([*args, "--call-costs", str(costs)]) != 0
    assert "--call-costs" in capsys.readouterr().err
