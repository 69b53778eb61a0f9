"""`compile_grammar`: Lark grammar + vocabulary → token-level PDA (`TokenDFA` with a stack block)."""

from __future__ import annotations

import os
from importlib import resources

import numpy as np

from automata_compile._errors import InvalidGrammarError
from automata_compile.automata import build_byte_pda, limits
from automata_compile.frontends.grammar import read_grammar
from automata_compile.pipeline._cache import cached_tables
from automata_compile.tokens import TokenDFA, token_pda

BUILTIN_GRAMMARS = ("arithmetic", "json")


def builtin_grammar(name: str) -> str:
    """The text of a grammar shipped in ``automata_compile/grammars`` (``"json"``: RFC 8259;
    ``"arithmetic"``: arithmetic expressions with function calls).

    Raises:
      InvalidGrammarError: no built-in grammar of that name.
    """
    if name not in BUILTIN_GRAMMARS:
        raise InvalidGrammarError(
            f"no built-in grammar {name!r}; expected one of {', '.join(BUILTIN_GRAMMARS)}"
        )
    return resources.files("automata_compile.grammars").joinpath(f"{name}.lark").read_text("utf-8")


def compile_grammar(
    text: str,
    vocab,
    *,
    start: str = "start",
    max_states: int | None = None,
    timeout_s: float | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> TokenDFA:
    """Compiles a deterministic context-free grammar in Lark's EBNF for a vocabulary.

    Supported: rules, ``"literals"`` (with the ``i`` flag), ``/regex/flags`` terminals (the
    regex extensions of `compile_regex` that build character automata work inside them),
    ``?`` ``*`` ``+`` ``[...]`` ``|`` ``~ n..m``, grouping, ``%ignore``, ``%import common.X``.
    Immediate left recursion (``a: a "+" b | b``) is rewritten into a repetition. The
    language is scannerless: terminals are matched by their regexes with ``%ignore``d
    text allowed after each terminal and at the start, with no longest-match lexing.

    Args:
      text: the grammar text, or the name of a built-in grammar (see `builtin_grammar`).
      vocab: an `automata_compile.Vocabulary` that can spell every byte with one token.
      start: the start rule.
      max_states: budget for the byte-level automaton (all rules together).
      timeout_s: optional wall-clock limit, checked at the automaton core's checkpoints
        while the rules' automata are built (`CompileTimeoutError`, naming the rule).
      cache_dir: optional folder where the tables are kept and loaded from the next time
        (`pipeline._cache`; the grammar's text, ``start`` and ``max_states`` are its key).

    Returns:
      A `TokenDFA` with the PDA block (``is_pda``); it shares its format with DFAs, so the
      runtime batches both.

    Raises:
      InvalidGrammarError: lark rejects the text; an undefined start rule.
      GrammarConflictError: one byte of lookahead cannot decide between two moves (names
        the rules and an example input).
      LeftRecursionError: left recursion other than the immediate form.
      UnsupportedGrammarError: templates, declared terminals, terminal labels, a
        vocabulary that cannot spell some byte alone.
      InvalidPatternError, UnsupportedPatternError: a terminal's regex.

    Example:
      >>> import automata_compile as ac
      >>> vocab = ac.Vocabulary.from_bytes([b"(", b")", b"()", b"<eos>"], eos_ids=[3], special_ids=[3])
      >>> pda = ac.compile_grammar('start: ("(" start ")")*', vocab)
      >>> pda.accepts([0, 2, 1]), pda.accepts([0, 0, 1]), pda.accepts([2, 2])
      (True, False, True)
    """
    spec = builtin_grammar(text) if text in BUILTIN_GRAMMARS else text
    if cache_dir is not None:
        return cached_tables(
            cache_dir,
            kind="grammar",
            spec=[spec, start, max_states],
            vocab=vocab,
            build=lambda: compile_grammar(
                spec, vocab, start=start, max_states=max_states, timeout_s=timeout_s
            ),
        )[0]
    with limits(timeout_s, "the grammar"):
        grammar = read_grammar(spec, vocab, start=start)
        pda = build_byte_pda(grammar, max_states=max_states)
        return pda_tables(pda, vocab, spec_kind="grammar", spec=spec)


def pda_tables(pda, vocab, *, spec_kind: str, spec: str, cut: bool = False):
    """``pda`` composed with ``vocab`` (`token_pda`); from `BLOCK_MIN_STATES` states, each
    grammar rule's states one state block (`tokens._blocks`): a rule's rows hold only the
    token classes its own states tell apart, not the refinement of every rule's, and the
    dense ``[Q, C]`` table is never built (SchemaStore's dependabot.json on Llama-3: 1,252
    MB of dense tables, 220 MB in blocks, put on the device in 0.2 s instead of 7 s). A
    smaller PDA stays dense: its table is small, and a dense step reads one class map for
    the whole batch. The same automaton either way. ``cut``: see `tokens.compose_pda`."""
    rules = len(pda.names) > 1 and pda.num_states >= BLOCK_MIN_STATES
    block = np.asarray(pda.rule_of) if rules else None
    return token_pda(pda, vocab, spec_kind=spec_kind, spec=spec, block=block, cut=cut)


# A byte PDA with at least this many states gets a state block per rule (`pda_tables`;
# benchmarks/schema_blocks_mask.py: a 1,565-state recursive schema takes 8.3 MB on the
# device in blocks, 9.4 MB dense, and its mask step is 0.01-0.03 ms slower on the CPU).
BLOCK_MIN_STATES = 4096
