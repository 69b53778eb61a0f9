"""`compile_grammar` on a byte vocabulary: languages against the hand-written oracle, refusals
with their messages, the PDA block of the artifact format."""

from __future__ import annotations

import functools
import random
import sys
from pathlib import Path

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

import automata_compile as ac

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import grammar_oracle as go  # noqa: E402

EOS = 256


@pytest.fixture(scope="module")
def byte_vocab():
    """Every single byte, a few multi-byte tokens that cross rule boundaries, and EOS."""
    extra = [b'"}', b"]]", b"}]", b'":', b"),", b"))", b"(((", b'{"a":[1,', b"true]", b" ]}"]
    tokens = [bytes([b]) for b in range(256)] + [b"<eos>"] + extra
    return ac.Vocabulary.from_bytes(tokens, eos_ids=[EOS], special_ids=[EOS])


def _walks(pda, vocab, oracle, *, seed, walks=6, steps=25):
    """Random walks; at every step the full mask equals the oracle (brute force)."""
    rng = random.Random(seed)
    for _ in range(walks):
        state, stack, prefix = pda.start, (), b""
        for _ in range(steps):
            mask = pda.allowed(state, stack)
            got = set(np.flatnonzero(mask).tolist()) - {EOS}
            want = oracle.allowed_tokens(prefix, vocab.tokens)
            assert got == want, (prefix, sorted(got ^ want)[:10])
            assert bool(mask[EOS]) == oracle.in_language(prefix), prefix
            if not got:
                break
            short = [
                t for t in got if len(vocab.tokens[t]) > 1 or vocab.tokens[t] in b'{}[](),:-+*1x"]'
            ]
            tok = rng.choice(short if short and rng.random() < 0.8 else sorted(got))
            state, stack = pda.advance_config(state, stack, tok)
            prefix += vocab.tokens[tok]


def test_json_grammar_masks_equal_the_oracle(byte_vocab):
    pda = ac.compile_grammar("json", byte_vocab)
    assert pda.is_pda and pda.spec_kind == "grammar"
    _walks(pda, byte_vocab, go.json_oracle(), seed=1)


def test_arithmetic_grammar_masks_equal_the_oracle(byte_vocab):
    pda = ac.compile_grammar("arithmetic", byte_vocab)
    _walks(pda, byte_vocab, go.arithmetic_oracle(), seed=2)


BALANCED = go.Oracle(
    {"s": [(), (*go.lit(b"("), "s", *go.lit(b")"), "s"), (*go.lit(b"["), "s", *go.lit(b"]"), "s")]},
    "s",
)


@pytest.mark.parametrize(
    "grammar",
    [
        'start: ("(" start ")" | "[" start "]")*',
        'start: item*\n?item: "(" start ")" | "[" start "]"',
        'start: [pair start]\npair: "(" start ")" | "[" start "]"',
    ],
)
def test_balanced_brackets_in_several_spellings(byte_vocab, grammar):
    pda = ac.compile_grammar(grammar, byte_vocab)
    _walks(pda, byte_vocab, BALANCED, seed=3, walks=4, steps=30)


@pytest.mark.parametrize(
    "text, accepts, rejects",
    [
        ('start: start "+" "1" | "1"', [b"1", b"1+1+1"], [b"", b"+1", b"1+"]),
        ('start: /ab+/i "c"i', [b"abC", b"ABbbc"], [b"ac", b"abcc"]),
        ('start: "a"~2..3 ["b"]', [b"aa", b"aaab"], [b"a", b"aaaa"]),
        ('start: ("a".."c")+', [b"abcab"], [b"d", b""]),
        (
            'start: NUMBER ("," NUMBER)*\n%import common.NUMBER\n%import common.WS\n%ignore WS',
            [b" 1.5 , 2e3 ", b"7"],
            [b"1 2", b","],
        ),
        ('start: "x" a\na: "y"*\n', [b"x", b"xyy"], [b"xx", b"y"]),
    ],
)
def test_small_grammars_accept_and_reject(byte_vocab, text, accepts, rejects):
    pda = ac.compile_grammar(text, byte_vocab)
    for s in accepts:
        assert pda.accepts(list(s)), s
    for s in rejects:
        assert not pda.accepts(list(s)), s


@pytest.mark.parametrize(
    "text, error, pieces",
    [
        (
            'start: a | b\na: "x" "y"\nb: "x" "z"',
            ac.GrammarConflictError,
            ["rule 'start'", "b'x'", "enter rule 'a'", "enter rule 'b'"],
        ),
        (
            'start: a "x"\na: "x"?',
            ac.GrammarConflictError,
            ["rule 'a'", "b'x'", "continue rule 'a'", "end rule 'a'"],
        ),
        (
            'start: "if" s\ns: "e" | "if" s ["else" s]',
            ac.GrammarConflictError,
            ["rule 's'", "b'e'"],
        ),
        (
            'start: a "x"\na: b "y" | "z"\nb: a "w"',
            ac.LeftRecursionError,
            ["'a' -> 'b' -> 'a'", "rewrite this one as a repetition"],
        ),
        ('start: start "x"', ac.LeftRecursionError, ["'start'", "no alternative"]),
        ('start: "a" start', ac.UnsupportedGrammarError, ["'start'", "no finite string"]),
        ('start: ("a"', ac.InvalidGrammarError, ["lark rejects the grammar"]),
        ('begin: "a"', ac.InvalidGrammarError, ["start rule 'start' is not defined", "begin"]),
        ('start: t{"a"}\nt{x}: x', ac.UnsupportedGrammarError, ["rule 't'", "templates"]),
        ("start: A\n%declare A", ac.UnsupportedGrammarError, ["terminal 'A'", "%declare"]),
        (
            "start: /a(?=b)/ /b/",
            ac.UnsupportedPatternError,
            ["literal /a(?=b)/ in rule 'start'", "lookaround"],
        ),
        ("start: A\nA: /a/\n%ignore B", ac.InvalidGrammarError, ["lark rejects"]),
    ],
)
def test_refusals_name_the_cause(byte_vocab, text, error, pieces):
    with pytest.raises(error) as info:
        ac.compile_grammar(text, byte_vocab)
    for piece in pieces:
        assert piece in str(info.value), str(info.value)


def test_conflict_error_carries_rules_and_example(byte_vocab):
    with pytest.raises(ac.GrammarConflictError) as info:
        ac.compile_grammar('start: a | b\na: "xy"\nb: "xz"', byte_vocab)
    assert info.value.rules == ("start", "a", "b")
    assert info.value.example == b"x"


def test_vocabulary_that_cannot_spell_a_byte_is_refused():
    vocab = ac.Vocabulary.from_bytes([b"(", b"()", b"<eos>"], eos_ids=[2], special_ids=[2])
    with pytest.raises(
        ac.UnsupportedGrammarError, match=r"no single-byte token for byte\(s\) 0x29"
    ):
        ac.compile_grammar('start: ("(" start ")")*', vocab)


def test_builtin_grammars_by_name():
    assert "object" in ac.builtin_grammar("json")
    with pytest.raises(ac.InvalidGrammarError, match="no built-in grammar 'yaml'"):
        ac.builtin_grammar("yaml")


def test_pda_artifact_round_trip_and_format_checks(byte_vocab, tmp_path):
    pda = ac.compile_grammar("json", byte_vocab)
    path = tmp_path / "json.npz"
    pda.save(path)
    back = ac.TokenDFA.load(path, vocab=byte_vocab)
    assert back.is_pda and back.metadata()["pda"]
    for name, arr in pda.pda_arrays().items():
        np.testing.assert_array_equal(getattr(back, name), arr)
    doc = list(b'{"a": [1, -2.5e3, "\\u00e9x", {}], "b": null}')
    assert back.accepts(doc) and not back.accepts(doc[:-1])
    with pytest.raises(ac.TableFormatError, match="PDA block: expected all of"):
        ac.TokenDFA(**{**_fields(pda), "cd_pop": None})
    bad = pda.cd_target.copy()
    bad[0] = pda.num_states
    with pytest.raises(ac.TableFormatError, match="cd_target must lie in"):
        ac.TokenDFA(**{**_fields(pda), "cd_target": bad})


def test_version_1_dfa_files_still_load(byte_vocab, tmp_path):
    import json

    dfa = ac.compile_regex("ab+", byte_vocab)
    meta = dfa.metadata()
    meta["format_version"] = 1
    meta.pop("pda")
    path = tmp_path / "v1.npz"
    np.savez(
        path,
        meta=np.frombuffer(json.dumps(meta).encode(), np.uint8),
        token_class=dfa.token_class,
        next_state=dfa.next_state,
        accepting=dfa.accepting,
    )
    back = ac.TokenDFA.load(path)
    assert not back.is_pda and back.accepts(list(b"abb"))


def _fields(dfa):
    import dataclasses

    return {f.name: getattr(dfa, f.name) for f in dataclasses.fields(dfa)}


def test_regex_extensions_inside_terminals_and_labels_refused(byte_vocab):
    pda = ac.compile_grammar('start: Q ("," Q)*\nQ: /(?P<QUOTED_TEXT>)/', byte_vocab)
    assert pda.accepts(list(b'"a b","\\"x"')) and not pda.accepts(list(b'"a",'))
    with pytest.raises(ac.UnsupportedGrammarError, match="terminal labels .*TEXT_TOKEN"):
        ac.compile_grammar("start: /(?P<TEXT_TOKEN>)/", byte_vocab)


def test_module_doctests():
    import doctest

    from automata_compile.pipeline import _grammar

    assert doctest.testmod(_grammar).failed == 0


def test_cli_grammar(mistral_sp_path, tmp_path):
    import json
    import subprocess

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "automata_compile", "grammar", *map(str, args),
             "--tokenizer", str(mistral_sp_path), "-o", str(tmp_path / "g.npz")],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    grammar = tmp_path / "g.lark"
    grammar.write_text('top: "(" top ")" | "x"\n')
    proc = run(grammar, "--start", "top")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    pda = ac.TokenDFA.load(tmp_path / "g.npz")
    assert pda.is_pda and report["states"] == pda.num_states
    proc = run("json")
    assert proc.returncode == 0, proc.stderr
    assert "object" in ac.TokenDFA.load(tmp_path / "g.npz").spec
    grammar.write_text('start: a | b\na: "x"\nb: "x"\n')
    proc = run(grammar)
    assert proc.returncode == 2 and "grammar conflict in rule 'start'" in proc.stderr


@functools.cache
def _byte_pda(name):
    tokens = [bytes([b]) for b in range(256)] + [b"<eos>"]
    vocab = ac.Vocabulary.from_bytes(tokens, eos_ids=[EOS], special_ids=[EOS])
    return ac.compile_grammar(name, vocab)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
    max_leaves=12,
)  # fmt: skip


@hypothesis.settings(max_examples=150, deadline=None)
@hypothesis.given(
    value=_JSON_VALUES,
    indent=st.sampled_from([None, 0, 2]),
    ascii_only=st.booleans(),
    cut=st.integers(0, 10**6),
    byte=st.integers(0, 255),
)
def test_json_documents_and_mutations_agree_with_the_oracle(value, indent, ascii_only, cut, byte):
    import json

    pda, oracle = _byte_pda("json"), _JSON_ORACLE
    doc = json.dumps(value, indent=indent, ensure_ascii=ascii_only).encode()
    assert pda.accepts(list(doc)) and oracle.in_language(doc)
    i = cut % (len(doc) + 1)
    for variant in (doc[:i], doc[:i] + bytes([byte]) + doc[i:], doc[:i] + doc[i + 1 :]):
        assert pda.accepts(list(variant)) == oracle.in_language(variant), variant
        config = pda.walk_config(list(variant))
        assert (config is not None) == oracle.viable(variant), variant


_JSON_ORACLE = go.json_oracle()


_SP = st.sampled_from(["", " ", "  ", "\n"])
_ATOMS = st.one_of(
    st.from_regex(r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?", fullmatch=True),
    st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,5}", fullmatch=True),
)


def _expr(kids):
    binary = st.tuples(kids, _SP, st.sampled_from("+-*/%^"), _SP, kids).map("".join)
    paren = st.tuples(st.just("("), _SP, kids, st.just(")")).map("".join)
    neg = st.tuples(st.just("-"), _SP, kids).map("".join)
    call = st.tuples(
        st.from_regex(r"[a-z]{1,4}", fullmatch=True), _SP,
        st.lists(kids, max_size=3).map(lambda xs: "(" + ", ".join(xs) + ")"),
    ).map("".join)  # fmt: skip
    return binary | paren | neg | call


@hypothesis.settings(max_examples=150, deadline=None)
@hypothesis.given(
    expr=st.recursive(_ATOMS, _expr, max_leaves=8),
    cut=st.integers(0, 10**6),
    byte=st.sampled_from(b"+-*/%^(), .e0aZ_\n"),
)
def test_arithmetic_expressions_and_mutations_agree_with_the_oracle(expr, cut, byte):
    pda, oracle = _byte_pda("arithmetic"), _ARITH_ORACLE
    doc = expr.encode()
    assert pda.accepts(list(doc)) and oracle.in_language(doc), doc
    i = cut % (len(doc) + 1)
    for variant in (doc[:i], doc[:i] + bytes([byte]) + doc[i:], doc[:i] + doc[i + 1 :]):
        assert pda.accepts(list(variant)) == oracle.in_language(variant), variant
        assert (pda.walk_config(list(variant)) is not None) == oracle.viable(variant), variant


_ARITH_ORACLE = go.arithmetic_oracle()
