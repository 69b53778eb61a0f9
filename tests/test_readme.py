"""README.md and the reference pages in docs/ tell the truth: the quickstart and the grammar
example run, the commands are the ones CI and the job use, and the regex-syntax table
(docs/regex.md) matches what the compiler accepts and refuses."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _doc(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


TRY_COMMAND = 'pip install -e ".[demo]" && python -m automata_jax.extract --output people.jsonl'
TEST_COMMAND = 'pip install -e ".[test]" && python -m pytest'


def quickstart() -> str:
    block = re.search(
        r"<!-- quickstart:begin[^>]*-->\s*```python\n(.*?)```\s*<!-- quickstart:end -->",
        README,
        re.DOTALL,
    )
    assert block, "README.md: no ```python block between the quickstart markers"
    return block.group(1)


def test_quickstart_is_short():
    assert len(quickstart().strip().splitlines()) <= 15


def test_quickstart_runs_and_prints_schema_valid_json(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # it writes name.npz
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compile(quickstart(), "README.md:quickstart", "exec"), {"__name__": "__readme__"})
    obj = json.loads(stdout.getvalue())
    assert set(obj) == {"name"} and isinstance(obj["name"], str) and len(obj["name"]) <= 20
    assert (tmp_path / "name.npz").is_file()


def test_commands_are_in_the_readme_and_in_ci():
    fenced = re.findall(r"```bash\n(.*?)```", README, re.DOTALL)
    assert TRY_COMMAND in [b.strip() for b in fenced]
    assert TEST_COMMAND in [b.strip() for b in fenced]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_lines = [line.replace(" -q", "") for line in ci.splitlines() if "pytest" in line]
    assert TEST_COMMAND in ci_lines, "README's test command and .ci/run disagree"


def test_grammar_example_runs_and_prints_a_valid_prefix():
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    import grammar_oracle

    block = re.search(
        r"<!-- grammar:begin -->\s*```python\n(.*?)```\s*<!-- grammar:end -->",
        _doc("grammars.md"),
        re.DOTALL,
    )
    assert block, "docs/grammars.md: no ```python block between the grammar markers"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(
            compile(block.group(1), "docs/grammars.md:grammar", "exec"), {"__name__": "__readme__"}
        )
    text = stdout.getvalue()[:-1].encode()
    assert text and grammar_oracle.arithmetic_oracle().viable(text), text


# Reference pages the README links, each with the headings it must keep.
DOC_PAGES = {
    "regex.md": ("## Supported regex syntax", "## Regex extensions"),
    "json_schema.md": ("# JSON Schema keywords and options",),
    "grammars.md": ("# Grammars",),
    "runtime.md": ("## Flax models", "## Real Gemma weights on a Colab TPU"),
    "extraction_job.md": ("# The extraction job",),
    "compile_cli.md": ("## The compile CLI",),
    "install_and_test_data.md": ("## Install", "## Test data on a fresh clone"),
}


def test_sections_and_links():
    for title in ("How it works", "Try it", "Run the tests", "Quickstart", "Features", "Links"):
        assert re.search(rf"^## {title}$", README, re.MULTILINE), title
    assert "(BENCHMARKS.md)" in README and "(COVERAGE.md)" in README
    assert len(README.splitlines()) <= 250, "README.md: keep it at most 250 lines"
    for name, titles in DOC_PAGES.items():
        assert f"(docs/{name})" in README, name
        for title in titles:
            assert re.search(rf"^{re.escape(title)}$", _doc(name), re.MULTILINE), (name, title)


def test_relative_links_resolve():
    """Every relative link in README.md and docs/*.md names a file that exists."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


# The regex-syntax table, row by row: constructs it lists as supported compile, and the
# refused ones raise UnsupportedPatternError.
SUPPORTED = [
    r"a.b", r"(?s)a.b", r"[a-z]+[^abc]", r"\d\w\s\D\W\S", r"(?a)\d+", r"a*b+c?d{2}e{2,}f{2,3}",
    r"a*?b+?c??d{2,3}?", r"(ab)(?:cd)(?P<name>ef)", r"ab|cd", r"(?i)straße", r"(?x) a b  # note",
    r"(?i:ab)c", r"\n\t\x41\u00e9\U0001F600\N{GREEK SMALL LETTER ALPHA}\0", r"^abc$", r"\Aabc\Z",
]  # fmt: skip
REFUSED = [
    r"(a)\1", r"(?P<x>a)(?P=x)", r"a(?=b)", r"a(?!b)", r"(?<=a)b", r"(?<!a)b", r"(a)?(?(1)b|c)",
    r"(?>ab)", r"a*+", r"a++", r"a?+", r"\bab", r"a\Bb", r"a^b", r"a$b",
]  # fmt: skip


@pytest.fixture(scope="module")
def byte_vocab():
    from automata_compile import Vocabulary

    return Vocabulary.from_bytes([bytes([i]) for i in range(256)] + [b""], eos_ids=[256])


@pytest.mark.parametrize("pattern", SUPPORTED)
def test_supported_regex_syntax_compiles(byte_vocab, pattern):
    from automata_compile import compile_regex

    compile_regex(pattern, byte_vocab)


@pytest.mark.parametrize("pattern", REFUSED)
def test_refused_regex_syntax_raises(byte_vocab, pattern):
    from automata_compile import UnsupportedPatternError, compile_regex

    with pytest.raises(UnsupportedPatternError):
        compile_regex(pattern, byte_vocab)


def _section(title: str, text: str = README) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"no '## {title}' section"
    return match.group(1)


def test_compile_cli_section_commands_run(tmp_path):
    """The compile CLI's commands (docs/compile_cli.md) (with `--tokenizer default`, the bundled tokenizer) run
    as written and write the tables files they name."""
    import shlex
    import subprocess
    import sys

    section = _section("The compile CLI", _doc("compile_cli.md"))
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    commands = [shlex.split(c) for c in block.splitlines() if c.startswith("python -m automata_")]
    assert len(commands) >= 2 and all("default" in c for c in commands)
    assert "automata-compile" in block and "--lenient" in section
    # The page's relative `automata_jax/data/...` paths point into the checkout. (A folder named
    # automata_jax in the working directory would shadow the installed package.)
    for argv in commands:
        argv[:] = [str(ROOT / a) if a.startswith("automata_jax/data/") else a for a in argv]
        proc = subprocess.run(
            [sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / json.loads(proc.stdout)["output"]).is_file()


def test_demo_outputs_are_gitignored():
    """What the README's commands write in a checkout (the job's output and cache, the
    tables files of the quickstart and the compile-CLI examples) is ignored by git."""
    import shutil
    import subprocess

    tables = re.findall(r'\.save\("([^"]+)"\)', README)
    tables += re.findall(r" -o (\S+)", _section("The compile CLI", _doc("compile_cli.md")))
    assert {"name.npz", "date.npz", "person.npz"} <= set(tables)  # the patterns find them
    paths = ["people.jsonl", ".automata_cache/person-0123.npz", "sub/.automata_cache/xla/x"]
    paths += tables
    if shutil.which("git") and (ROOT / ".git").exists():
        proc = subprocess.run(
            ["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True
        )
        assert sorted(proc.stdout.split()) == sorted(paths), proc.stderr
    else:  # not a git checkout: read the patterns
        patterns = (ROOT / ".gitignore").read_text().splitlines()
        assert {".automata_cache/", "/people.jsonl", "/*.npz"} <= set(patterns)


def test_benchmarks_has_one_section_per_area():
    """BENCHMARKS.md is today's figures by area, with superseded runs in a History at the end."""
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    areas = re.findall(r"^## (.*)$", text, re.MULTILINE)
    for prefix in (
        "Compile time",
        "Time to first mask and schema corpora",
        "Decode overhead",
        "Fast-forward and speculation",
        "Grammars and tool calls",
        "Real model: extraction quality and speed",
        "Real model: accuracy (BFCL)",
    ):
        assert sum(a.startswith(prefix) for a in areas) == 1, prefix
    assert areas[-1] == "History"
