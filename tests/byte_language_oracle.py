"""A JSON Schema's byte language built from scratch, for the tests that compare a compiler
change with the former path, switched by a module flag (tests/compile/automata/
test_thompson_sharing.py, test_byte_dfa_pieces.py; tests/compile/frontends/json_schema/
test_order_floors.py, test_whole_labels.py): empty memos (a hit would skip the construction
under test), the byte DFA or the byte PDA's arrays, the warnings, and their comparison; and
the nested object schemas they generate."""

from __future__ import annotations

import collections
import warnings

import numpy as np
from hypothesis import strategies as st

from automata_compile import AutomataError, EmptyLanguageError
from automata_compile.automata import _byte_dfa
from automata_compile.frontends.json_schema import parse_options
from automata_compile.pipeline._json_schema import byte_language


def fresh_memos(mp) -> None:
    """Empties the byte DFAs' memos (the cross-compile cache and the pieces) through the
    monkeypatch ``mp``."""
    mp.setattr(_byte_dfa, "_CACHE", collections.OrderedDict())
    mp.setattr(_byte_dfa, "_cache_bytes", 0)
    mp.setattr(_byte_dfa, "_PIECES", {})


def byte_arrays(schema, options: dict | None = None) -> tuple[tuple, list[str]]:
    """The byte language of ``schema`` with fresh memos, and its warnings (``"Type:
    message"``). The language: ``("pda", rule_of, starts, shift, ends, kind, arg, ret)``,
    ``("dfa", trans, accepting, start)``, ``("empty",)``, or ``("error", type, message)`` for
    a refusal or a budget (compared like the rest: the same outcome on both paths)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ir, pda = byte_language(schema, parse_options(dict(options or {})))
            if pda is not None:
                p = pda
                out = ("pda", p.rule_of, p.starts, p.shift, p.ends, p.kind, p.arg, p.ret)
            else:
                d = _byte_dfa.build_byte_dfa(ir, what="the schema")
                out = ("dfa", d.trans, d.accepting, d.start)
        except EmptyLanguageError:
            out = ("empty",)
        except AutomataError as e:
            out = ("error", type(e).__name__, str(e))
    return out, [f"{type(w.message).__name__}: {w.message}" for w in caught]


def assert_same(a: tuple, b: tuple) -> None:
    """Two `byte_arrays` languages are the same outcome, array for array."""
    assert a[0] == b[0], (a[:3] if a[0] == "error" else a[0], b[:3] if b[0] == "error" else b[0])
    for x, y in zip(a[1:], b[1:], strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@st.composite
def nested_objects(
    draw, *, depth, names, values, sizes=(1, 4), nest=3, required=2, max_items=(None,), tail=None
):
    """Objects of ``sizes`` properties named from ``names``, each value drawn from ``values``
    or, one time in ``nest`` while ``depth`` lasts, such an object again or an array of one
    (its ``maxItems`` drawn from ``max_items``, None: none); each property required one time
    in ``required``; ``tail(draw, schema)`` adds a test's own keywords."""
    chosen = draw(
        st.lists(st.sampled_from(names), min_size=sizes[0], max_size=sizes[1], unique=True)
    )
    props = {}
    for n in chosen:
        if depth and draw(st.integers(0, nest - 1)) == 0:
            inner = draw(
                nested_objects(
                    depth=depth - 1,
                    names=names,
                    values=values,
                    sizes=sizes,
                    nest=nest,
                    required=required,
                    max_items=max_items,
                    tail=tail,
                )  # fmt: skip
            )
            if draw(st.booleans()):
                inner = {"type": "array", "items": inner}
                bound = draw(st.sampled_from(max_items))
                if bound is not None:
                    inner["maxItems"] = bound
            props[n] = inner
        else:
            props[n] = draw(st.sampled_from(values))
    out = {"type": "object", "properties": props}
    req = [n for n in chosen if draw(st.integers(0, required - 1)) == 0]
    if req:
        out["required"] = req
    if tail is not None:
        tail(draw, out)
    return out


def closed_or_open(draw, schema) -> None:
    """A `nested_objects` tail: ``additionalProperties: false`` one time in two."""
    if draw(st.booleans()):
        schema["additionalProperties"] = False
