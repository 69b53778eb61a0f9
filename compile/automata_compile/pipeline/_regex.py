"""`compile_regex`: pattern + vocabulary → `TokenDFA`."""

from __future__ import annotations

import os

import numpy as np

from automata_compile.automata import build_byte_dfa, limits
from automata_compile.frontends import regex_ir
from automata_compile.pipeline._cache import cached_tables
from automata_compile.tokens import DEFAULT_MAX_TOKENS, TokenDFA, compose, forced_runs, trie_for


def compile_regex(
    pattern: str,
    vocab,
    *,
    max_states: int | None = None,
    spec_kind: str = "regex",
    spec: str | None = None,
    max_forced_tokens: int = DEFAULT_MAX_TOKENS,
    timeout_s: float | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> TokenDFA:
    """Compiles a regex (Python ``re`` syntax, full-match semantics) for a vocabulary.

    Args:
      pattern: the regular expression; Koo et al.'s extension groups such as
        ``(?P<PARAGRAPH_TOKEN>)`` are recognized (see docs/regex.md).
      vocab: an `automata_compile.Vocabulary`.
      max_states: budget for the byte-level DFA (default 100,000); exceeding it raises
        `StateBudgetExceededError` instead of running away.
      spec_kind, spec: recorded in the artifact (e.g. "json_schema" and the schema text).
      max_forced_tokens: F, the most forced tokens stored per state (see `tokens._forced`);
        0 stores none (the runtime's fast-forward then never fires).
      timeout_s: optional wall-clock limit in seconds, checked at the automaton core's
        budget checkpoints (subset construction, products, minimization, composition
        levels); past it, `CompileTimeoutError`.
      cache_dir: optional folder where the tables are kept and loaded from the next time
        (`pipeline._cache`; every argument but ``timeout_s`` is in its key).

    Returns:
      A minimal `TokenDFA` whose states can all still reach acceptance with this vocabulary.

    Raises:
      InvalidPatternError, UnsupportedPatternError, EmptyLanguageError,
      StateBudgetExceededError, CompileTimeoutError.

    Example:
      >>> import automata_compile as ac
      >>> vocab = ac.Vocabulary.from_bytes([b"1", b"2", b"12", b"<eos>"], eos_ids=[3], special_ids=[3])
      >>> dfa = ac.compile_regex(r"[12]{2}", vocab)
      >>> dfa.accepts([2]), dfa.accepts([0, 1]), dfa.accepts([0])
      (True, True, False)
    """
    if cache_dir is not None:
        key = [pattern, max_states, spec_kind, spec, max_forced_tokens]
        return cached_tables(
            cache_dir,
            kind="regex",
            spec=key,
            vocab=vocab,
            build=lambda: compile_regex(
                pattern,
                vocab,
                max_states=max_states,
                spec_kind=spec_kind,
                spec=spec,
                max_forced_tokens=max_forced_tokens,
                timeout_s=timeout_s,
            ),
        )[0]
    ir, predicates, terminal_names = regex_ir(pattern, vocab)
    return compile_ir(
        ir,
        vocab,
        predicates=predicates,
        terminal_names=terminal_names,
        max_states=max_states,
        max_forced_tokens=max_forced_tokens,
        spec_kind=spec_kind,
        spec=pattern if spec is None else spec,
        timeout_s=timeout_s,
    )


def compile_ir(
    ir,
    vocab,
    *,
    predicates=(),
    terminal_names=(),
    max_states: int | None = None,
    max_forced_tokens: int = DEFAULT_MAX_TOKENS,
    spec_kind: str,
    spec: str,
    what: str = "the pattern",
    timeout_s: float | None = None,
) -> TokenDFA:
    """Compiles an IR tree (any front end's output) for a vocabulary.

    Args:
      ir: an `automata._ir` tree; ``Terminal(k)`` uses ``predicates[k]``.
      predicates, terminal_names: the terminal labels (regex extensions).
      max_states, max_forced_tokens, spec_kind, spec: as in `compile_regex`.
      what: names the input in budget, timeout and empty-language errors.
      timeout_s: as in `compile_regex` (``None`` keeps an enclosing `automata.limits`).
    """
    with limits(timeout_s, what):
        return _compile_ir(
            ir,
            vocab,
            predicates,
            terminal_names,
            max_states,
            max_forced_tokens,
            spec_kind,
            spec,
            what,
        )


def _compile_ir(
    ir, vocab, predicates, terminal_names, max_states, max_forced_tokens, spec_kind, spec, what
) -> TokenDFA:
    byte_dfa = build_byte_dfa(ir, len(predicates), max_states=max_states, what=what)
    trie = trie_for(vocab)
    token_class, next_state, accepting, start, byte_state = compose(
        byte_dfa, trie, predicates, return_byte_states=True
    )
    forced = {}
    if max_forced_tokens > 0:
        runs = forced_runs(
            byte_dfa, byte_state, token_class, next_state, accepting, vocab, max_forced_tokens
        )
        forced = dict(forced_tokens=runs.tokens, forced_len=runs.length, forced_next=runs.next)
        forced["structure_draft"] = runs.draft
    return TokenDFA(
        token_class=token_class.astype(np.int32),
        next_state=next_state,
        accepting=accepting,
        start=start,
        eos_ids=tuple(vocab.eos_ids),
        vocab_fingerprint=vocab.fingerprint,
        spec_kind=spec_kind,
        spec=spec,
        terminals=tuple(terminal_names),
        **forced,
    )
