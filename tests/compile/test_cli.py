"""The command line, ``python -m automata_compile``, run as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from automata_compile import TokenDFA, Vocabulary, compile_regex


def run_cli(*args, stdin: str | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "automata_compile", *map(str, args)],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=timeout,
    )


def test_regex_success(mistral_sp_path, tmp_path):
    out = tmp_path / "date.npz"
    pattern = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    proc = run_cli("regex", pattern, "--tokenizer", mistral_sp_path, "-o", out)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["output"] == str(out) and out.is_file()
    assert report["vocab_size"] == 32_000
    for key in ("states", "classes", "table_bytes", "compile_s", "vocab_load_s"):
        assert key in report
    assert report["compile_s"] >= 0 and report["vocab_load_s"] >= 0
    # The file is the artifact the report describes, for this vocabulary.
    vocab = Vocabulary.from_file(mistral_sp_path)
    dfa = TokenDFA.load(out, vocab=vocab)
    assert (dfa.num_states, dfa.num_classes, dfa.nbytes) == (
        report["states"],
        report["classes"],
        report["table_bytes"],
    )
    assert dfa.spec == pattern and dfa.spec_kind == "regex"
    assert dfa.accepts(vocab.encode("2024-01-05")[1:])  # drop the dummy-prefix "▁"
    assert np.array_equal(dfa.token_class, compile_regex(pattern, vocab).token_class)


@pytest.mark.parametrize(
    "pattern,words",
    [
        ("(a", "missing ), unterminated subpattern at offset 0"),
        (r"(a)\1", "backreference"),
        (r"[^\s\S]", "matches no string"),
    ],
)
def test_regex_bad_pattern_exits_nonzero_with_message(pattern, words, mistral_sp_path, tmp_path):
    out = tmp_path / "bad.npz"
    proc = run_cli("regex", pattern, "--tokenizer", mistral_sp_path, "-o", out)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and words in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == "" and not out.exists()


def test_state_budget_option(mistral_sp_path, tmp_path):
    out = tmp_path / "big.npz"
    proc = run_cli(
        "regex", "(a|b)*a(a|b){20}", "--tokenizer", mistral_sp_path, "-o", out, "--max-states", 500
    )
    assert proc.returncode == 2 and "max_states=500" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_tokenizer_and_output_paths(mistral_sp_path, tmp_path):
    proc = run_cli("regex", "a", "--tokenizer", tmp_path / "absent.json", "-o", tmp_path / "x.npz")
    assert proc.returncode == 2 and "absent.json" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_cli("regex", "a", "--tokenizer", mistral_sp_path, "-o", tmp_path / "no/dir/x.npz")
    assert proc.returncode == 2 and proc.stderr.startswith("error: ")
    assert "Traceback" not in proc.stderr


def test_usage_errors():
    proc = run_cli()
    assert proc.returncode == 2 and "usage" in proc.stderr
    proc = run_cli("regex", "a")  # --tokenizer and -o are required
    assert proc.returncode == 2 and "--tokenizer" in proc.stderr
    proc = run_cli("--help")
    assert proc.returncode == 0 and "regex" in proc.stdout and "json-schema" in proc.stdout


def test_json_schema_from_stdin(mistral_sp_path, tmp_path):
    try:
        from automata_compile import compile_json_schema  # noqa: F401
    except ImportError as e:  # pragma: no cover - the JSON Schema compiler is a separate module
        pytest.skip(f"JSON Schema compiler not available: {e}")
    out = tmp_path / "schema.npz"
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    proc = run_cli(
        "json-schema", "-", "--tokenizer", mistral_sp_path, "-o", out, stdin=json.dumps(schema)
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert out.is_file() and report["states"] > 1
    assert TokenDFA.load(out).spec_kind == "json_schema"
    bad = run_cli("json-schema", "-", "--tokenizer", mistral_sp_path, "-o", out, stdin="{not json")
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")
    assert "Traceback" not in bad.stderr


def test_closed_objects_flag_rejects_invented_keys(mistral_sp_path, tmp_path):
    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}})
    vocab = Vocabulary.from_file(mistral_sp_path)
    byte_ids = {t: i for i, t in enumerate(vocab.tokens) if t is not None and len(t) == 1}

    def ids(text: str) -> list[int]:  # one token per byte (the encoder adds a space)
        return [byte_ids[bytes([b])] for b in text.encode()]

    for flag, extra_ok in (([], True), (["--closed-objects"], False)):
        out = tmp_path / f"s{len(flag)}.npz"
        args = ["json-schema", "-", "--tokenizer", mistral_sp_path, "-o", out, *flag]
        assert run_cli(*args, stdin=schema).returncode == 0
        dfa = TokenDFA.load(out)
        assert dfa.accepts(ids('{"n": 1}')) and dfa.accepts(ids("{}"))
        assert dfa.accepts(ids('{"n": 1, "m": 2}')) is extra_ok


# distinct integers, at least two: refused (the sound subset for an infinite item language,
# at most one item, is empty here)
UNIQUE_ITEMS = {
    "type": "array",
    "items": {"type": "integer"},
    "minItems": 2,
    "maxItems": 3,
    "uniqueItems": True,
}


def test_json_schema_refusal_and_warning_name_the_cli_flag(mistral_sp_path, tmp_path):
    """The CLI's knob is --lenient (not the Python API's strict=False); a dropped keyword is a
    plain 'warning: ...' line, not a Python UserWarning with a source path."""
    out = tmp_path / "u.npz"
    schema = json.dumps(UNIQUE_ITEMS)
    proc = run_cli("json-schema", "-", "--tokenizer", mistral_sp_path, "-o", out, stdin=schema)
    assert proc.returncode == 2 and not out.exists()
    assert "Pass --lenient to drop it" in proc.stderr and "strict=False" not in proc.stderr
    proc = run_cli(
        "json-schema", "-", "--tokenizer", mistral_sp_path, "-o", out, "--lenient", stdin=schema
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("warning: 'uniqueItems' at #/uniqueItems is not enforced")
    assert "UserWarning" not in proc.stderr and ".py:" not in proc.stderr
    assert json.loads(proc.stdout)["output"] == str(out)


def test_default_tokenizer_is_the_bundled_one_found_without_jax(mistral_sp_path, tmp_path):
    """--tokenizer default names automata_jax.testing.default_tokenizer_path()'s file, and
    the compiler resolves it (and compiles) without importing jax."""
    from automata_compile.__main__ import default_tokenizer_path

    assert default_tokenizer_path() == mistral_sp_path.resolve()
    out = tmp_path / "d.npz"
    code = (
        "import sys; from automata_compile.__main__ import main; "
        f"rc = main(['regex', '[0-9]+', '--tokenizer', 'default', '-o', {str(out)!r}]); "
        "assert 'jax' not in sys.modules, 'the compiler imported jax'; sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["vocab_size"] == 32_000
    assert TokenDFA.load(out, vocab=Vocabulary.from_file(mistral_sp_path)).spec == "[0-9]+"


@pytest.mark.parametrize("argv", [["--help"], ["regex", "--help"], ["json-schema", "--help"]])
def test_help_is_plain_text(argv):
    proc = run_cli(*argv)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: ")
    assert "``" not in proc.stdout and ":func:" not in proc.stdout and "`" not in proc.stdout
    if argv[0] == "json-schema":
        assert "--lenient" in proc.stdout and "'default'" in proc.stdout


def test_timeout_option_names_the_step(mistral_sp_path, tmp_path):
    """A timeout that has already passed at the first checkpoint: exit 2, a message that
    names the limit and the step; no output file, and no spinner on a non-terminal stderr."""
    out = tmp_path / "x.npz"
    proc = run_cli(
        "regex", "[a-z]{3,9}@[a-z]+", "--tokenizer", mistral_sp_path, "-o", out, "--timeout", 1e-9
    )
    assert proc.returncode == 2 and not out.exists()
    assert proc.stderr.startswith("error: compiling the regex ran past timeout_s=1e-09 s in ")
    assert "raise timeout_s" in proc.stderr and "..." not in proc.stderr


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_timeout_option_must_be_positive(value, mistral_sp_path, tmp_path):
    proc = run_cli(
        "regex", "a", "--tokenizer", mistral_sp_path, "-o", tmp_path / "x.npz", "--timeout", value
    )
    assert proc.returncode == 2 and "--timeout" in proc.stderr and "positive" in proc.stderr
