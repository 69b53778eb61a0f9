"""Oracles shared by the bitset any-order tests (tests/compile/tokens): the exact any-order
token tables walked beside the bitset reference rule, and hypothesis instances of the schemas
in `bitset_schemas` in shuffled key order.

A *pair* walks both automata together: `DFAPair` (a `TokenDFA` beside `BitsetTables`,
`reference_mask` / `reference_advance`) and `PDAPair` (a PDA `TokenDFA` through
`allowed` / `advance_config` beside `BitsetPDATables`, `reference_pda_mask` /
`reference_pda_advance`). `compare` and `random_walks` check that both allow the same tokens
before every step.
"""

from __future__ import annotations

import json

import numpy as np
from hypothesis import strategies as st

from automata_compile.tokens import (
    reference_advance,
    reference_mask,
    reference_pda_advance,
    reference_pda_mask,
)


class DFAPair:
    """A token DFA (the oracle) and `BitsetTables` (the reference rule), walked together."""

    def __init__(self, old, new, vocab):
        self.old, self.new, self.eos = old, new, list(vocab.eos_ids)

    def start(self):
        return self.old.start, self.new.start, np.zeros(self.new.words, np.uint32)

    def masks(self, config):
        so, sn, bits = config
        mo = self.old.next_state[so, self.old.token_class] >= 0
        mo[self.eos] = bool(self.old.accepting[so])
        return mo, reference_mask(self.new, sn, bits)

    def step(self, config, tok):
        so, sn, bits = config
        sn, bits = reference_advance(self.new, sn, bits, tok)
        return int(self.old.next_state[so, self.old.token_class[tok]]), sn, bits


class PDAPair:
    """PDA token tables (the oracle) and `BitsetPDATables` (the reference rule with a stack),
    walked together."""

    def __init__(self, old, new, vocab):
        self.old, self.new = old, new

    def start(self):
        return (self.old.start, ()), (self.new.start, (), np.zeros(self.new.words, np.uint32))

    def masks(self, config):
        (so, stack_o), (sn, stack_n, bits) = config
        return self.old.allowed(so, stack_o), reference_pda_mask(self.new, sn, stack_n, bits)

    def step(self, config, tok):
        (so, stack_o), (sn, stack_n, bits) = config
        old = self.old.advance_config(so, stack_o, tok)
        return old, reference_pda_advance(self.new, sn, stack_n, bits, tok)


def compare(pair, vocab, tokens) -> bool:
    """Walks ``tokens`` in both automata of ``pair``, comparing the allowed sets before each
    token and at the end; returns whether every token was allowed (and EOS at the end)."""
    config = pair.start()
    for i, tok in enumerate([*tokens, None]):
        mo, mn = pair.masks(config)
        if not np.array_equal(mo, mn):
            diff = np.flatnonzero(mo != mn)[:5]
            raise AssertionError(
                f"after {vocab.decode(tokens[:i])!r}: masks differ at "
                f"{[(vocab.tokens[t], bool(mo[t])) for t in diff]}"
            )
        if tok is None:
            return bool(mo[vocab.eos_ids[0]])
        if not mo[tok]:
            return False
        config = pair.step(config, tok)


def random_walks(pair, vocab, rng, *, walks, steps, stop=None, short=0.8, label=""):
    """``walks`` random walks of up to ``steps`` tokens with the allowed sets of both
    automata equal before each token. A walk ends where only EOS is allowed, or (``stop``)
    at random where EOS is; it picks tokens of <= 2 bytes with probability ``short``: they
    reach key prefixes and punctuation."""
    eos = vocab.eos_ids
    is_small = _small_tokens(vocab)
    for _ in range(walks):
        config, walked = pair.start(), []
        for _ in range(steps):
            mo, mn = pair.masks(config)
            assert np.array_equal(mo, mn), (
                f"{label} after {vocab.decode(walked)!r}: {np.flatnonzero(mo != mn)[:5]}"
            )
            not_eos = mo.copy()
            not_eos[list(eos)] = False
            allowed = np.flatnonzero(not_eos)
            if not allowed.size or (stop is not None and mo[eos[0]] and rng.random() < stop):
                break
            small = allowed[is_small[allowed]]
            tok = int(rng.choice(small if small.size and rng.random() < short else allowed))
            walked.append(tok)
            config = pair.step(config, tok)


_SMALL_TOKENS: dict = {}


def _small_tokens(vocab) -> np.ndarray:
    """Which ids of ``vocab`` are tokens of <= 2 bytes (computed once per vocabulary)."""
    if vocab.fingerprint not in _SMALL_TOKENS:
        _SMALL_TOKENS[vocab.fingerprint] = np.array(
            [t is not None and len(t) <= 2 for t in vocab.tokens]
        )
    return _SMALL_TOKENS[vocab.fingerprint]


# -- instances ------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 500) | st.text('ab"\\}{,', max_size=3),
    lambda inner: (
        st.lists(inner, max_size=2)
        | st.dictionaries(st.sampled_from(["a", "b", "k", "}"]), inner, max_size=2)
    ),
    max_leaves=4,
)


class Pairs(list):
    """An object instance as its (key, value) pairs in the order they are written."""


def instances(schema):
    """Instances of ``schema`` (the shapes of `bitset_schemas`: objects, arrays, enums,
    bounded integers, booleans, free values), objects as `Pairs` in shuffled key order,
    sometimes missing a required key (so some are invalid)."""
    if not schema:
        return JSON_VALUES
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    t = schema["type"]
    if t == "integer":
        return st.integers(schema.get("minimum", -50), schema.get("maximum", 5000))
    if t == "boolean":
        return st.booleans()
    if t == "array":
        return st.lists(instances(schema["items"]), max_size=schema["maxItems"])
    return _object(schema)


def _object(schema):
    props = schema["properties"]
    req = set(schema.get("required", ()))
    extra = schema.get("additionalProperties", True)
    extra_values = instances(extra) if isinstance(extra, dict) else JSON_VALUES

    @st.composite
    def build(draw):
        keys = [k for k in props if k in req or draw(st.booleans())]
        if draw(st.integers(0, 5)) == 0 and req:  # sometimes drop a required key: invalid
            keys.remove(draw(st.sampled_from(sorted(req))))
        pairs = [(k, draw(instances(props[k]))) for k in keys]
        if extra:
            names = [n for n in ("zz", "a2", "q") if n not in props]  # duplicates: refused
            for n in draw(st.lists(st.sampled_from(names), max_size=2, unique=True)):
                pairs.append((n, draw(extra_values)))
        order = draw(st.permutations(range(len(pairs))))
        return Pairs(pairs[i] for i in order)

    return build()


def text(x) -> str:
    """The JSON text of an instance (`Pairs` in their order), ``json.dumps`` spacing."""
    if isinstance(x, Pairs):
        return "{" + ", ".join(f"{json.dumps(k)}: {text(v)}" for k, v in x) + "}"
    if isinstance(x, list):
        return "[" + ", ".join(text(v) for v in x) + "]"
    return json.dumps(x)
