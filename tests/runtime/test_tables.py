"""ConstraintTables: padding, bucketing, vocabulary checks, artifacts, bitmasks."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from automata_compile import IncompatibleVocabularyError, TableFormatError, TokenDFA
from automata_jax import ConstraintTables, RuntimeShapeError
from automata_jax._tables import bucket

EOS = 3


def toy_dfa(fingerprint: str = "toy-vocab") -> TokenDFA:
    """(ab)+c? over tokens 0='a', 1='b', 2='ab', 3=EOS, 4=special, 5='c'."""
    return TokenDFA(
        token_class=np.array([1, 2, 3, 0, 0, 4], np.int32),
        next_state=np.array(
            [[-1, 1, -1, 2, -1], [-1, -1, 2, -1, -1], [-1, 1, -1, 2, 3], [-1, -1, -1, -1, -1]],
            np.int32,
        ),
        accepting=np.array([False, False, True, True]),
        start=0,
        eos_ids=(EOS,),
        vocab_fingerprint=fingerprint,
        spec="(ab)+c?",
    )


def b_star_c() -> TokenDFA:
    """b*c over the same vocabulary."""
    return TokenDFA(
        token_class=np.array([0, 1, 0, 0, 0, 2], np.int32),
        next_state=np.array([[-1, 0, 1], [-1, -1, -1]], np.int32),
        accepting=np.array([False, True]),
        start=0,
        eos_ids=(EOS,),
        vocab_fingerprint="toy-vocab",
        spec="b*c",
    )


def test_bucket():
    assert [bucket(n) for n in (0, 1, 8, 9, 16, 17, 430)] == [8, 8, 8, 16, 16, 32, 512]
    assert bucket(3, 1) == 4 and bucket(1, 1) == 1


def test_cells_bucket_pads_at_most_a_quarter_past_fine_cells():
    from automata_jax._capacity import FINE_CELLS, cells_bucket

    assert [cells_bucket(n) for n in (0, 9, FINE_CELLS)] == [8, 16, FINE_CELLS]
    assert cells_bucket(FINE_CELLS + 1) == FINE_CELLS * 5 // 4
    assert cells_bucket(82_029_539) == 5 << 24  # compose-spec.json's blocks: 84 M, not 134 M
    rng = np.random.default_rng(0)
    for n in rng.integers(FINE_CELLS + 1, 1 << 31, 2000).tolist():
        b = cells_bucket(n)
        assert n <= b <= 1.25 * n
        assert b >> (b.bit_length() - 3) in (4, 5, 6, 7)  # four sizes per power of two


def test_large_dense_tables_take_quarter_power_of_two_buckets():
    """Past ``FINE_DENSE_CELLS`` dense cells (as powers of two), Q and C are rounded to a
    quarter power of two (3,000 x 1,500: 3,072 x 1,536, not 4,096 x 2,048); the masks
    are the TokenDFA's."""
    from automata_jax._capacity import FINE_DENSE_CELLS

    q, c, v = 3000, 1500, 2000
    assert bucket(q) * bucket(c) > FINE_DENSE_CELLS
    rng = np.random.default_rng(0)
    ns = np.where(rng.random((q, c)) < 0.01, rng.integers(0, q, (q, c)), -1).astype(np.int32)
    ns[:, 0] = -1
    dfa = TokenDFA(
        token_class=(np.arange(v) % c).astype(np.int32),
        next_state=ns,
        accepting=rng.random(q) < 0.1,
        start=0,
        eos_ids=(v - 1,),
        vocab_fingerprint="toy",
    )
    tables = ConstraintTables.from_dfas(dfa, vocab_size=v)
    assert tables.padded_shape == (1, 3072, 1536)
    small = ConstraintTables.from_dfas(toy_dfa(), vocab_size=6)  # small tables: powers of two
    assert all(n & (n - 1) == 0 for n in small.padded_shape)
    import automata_jax as aj

    for s in (0, 17, 2999):
        state = dataclasses.replace(
            aj.init_state(tables, jax.numpy.zeros((1,), jax.numpy.int32)),
            state=jax.numpy.array([s], jax.numpy.int32),
        )
        mask = np.asarray(aj.allowed_mask(tables, state))[0]
        np.testing.assert_array_equal(mask, dfa.allowed(s))


def test_single_dfa_padded_and_bucketed():
    dfa = toy_dfa()
    tables = ConstraintTables.from_dfas(dfa, vocab_size=8)
    assert tables.padded_shape == (1, 8, 8)
    assert tables.vocab_size == 8
    assert isinstance(tables.next_state, jax.Array)
    ns = np.asarray(tables.next_state)
    np.testing.assert_array_equal(ns[0, :4, :5], dfa.next_state)
    assert (ns[0, 4:] == -1).all() and (ns[0, :, 5:] == -1).all()
    np.testing.assert_array_equal(np.asarray(tables.token_class)[0], [1, 2, 3, 0, 0, 4, 0, 0])
    np.testing.assert_array_equal(np.asarray(tables.accepting)[0, :4], dfa.accepting)
    assert not np.asarray(tables.accepting)[0, 4:].any()
    np.testing.assert_array_equal(np.asarray(tables.viable)[0, :5], [True, True, True, True, False])
    np.testing.assert_array_equal(np.asarray(tables.eos_mask), np.arange(8) == EOS)
    assert int(tables.num_constraints) == 1 and tables.eos_ids == (EOS,)
    assert tables.nbytes == sum(x.nbytes for x in jax.tree.leaves(tables)) > 0
    assert "K=1" in repr(tables)


def test_many_dfas_pad_k_and_padded_constraints_are_dead():
    tables = ConstraintTables.from_dfas([toy_dfa(), b_star_c(), toy_dfa()], vocab_size=6)
    assert tables.padded_shape == (4, 8, 8)
    assert int(tables.num_constraints) == 3
    assert not np.asarray(tables.viable)[3].any()
    assert (np.asarray(tables.next_state)[3] == -1).all()


def test_same_bucket_same_treedef_and_shapes():
    a = ConstraintTables.from_dfas([toy_dfa()], vocab_size=6)
    b = ConstraintTables.from_dfas([b_star_c()], vocab_size=6)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    assert [x.shape for x in jax.tree.leaves(a)] == [x.shape for x in jax.tree.leaves(b)]


def test_eos_ids_get_class_zero():
    dfa = toy_dfa()
    tc = dfa.token_class.copy()
    tc[EOS] = 1  # a sloppy table giving EOS a real class
    sloppy = TokenDFA(
        token_class=tc, next_state=dfa.next_state, accepting=dfa.accepting, start=0,
        eos_ids=(EOS,), vocab_fingerprint="toy-vocab",
    )  # fmt: skip
    tables = ConstraintTables.from_dfas(sloppy, vocab_size=6)
    assert int(np.asarray(tables.token_class)[0, EOS]) == 0


def test_wider_vocabulary_truncated_only_when_extra_ids_are_never_allowed():
    dfa = toy_dfa()
    with pytest.raises(IncompatibleVocabularyError, match="logits width is 5"):
        ConstraintTables.from_dfas(dfa, vocab_size=5)
    wide = TokenDFA(
        token_class=np.concatenate([dfa.token_class, np.zeros(10, np.int32)]),
        next_state=dfa.next_state, accepting=dfa.accepting, start=0, eos_ids=(EOS,),
        vocab_fingerprint="toy-vocab",
    )  # fmt: skip
    tables = ConstraintTables.from_dfas(wide, vocab_size=6)
    assert tables.vocab_size == 6


def test_mismatched_fingerprints_refused():
    with pytest.raises(IncompatibleVocabularyError, match="share one vocabulary"):
        ConstraintTables.from_dfas([toy_dfa(), toy_dfa("other-vocab")], vocab_size=6)


def test_check_vocabulary():
    tables = ConstraintTables.from_dfas(toy_dfa(), vocab_size=6)
    tables.check_vocabulary("toy-vocab")
    with pytest.raises(IncompatibleVocabularyError, match="expected vocabulary"):
        tables.check_vocabulary("another")


def test_artifact_paths(tmp_path):
    path = tmp_path / "toy.npz"
    toy_dfa().save(path)
    tables = ConstraintTables.from_dfas([path, str(path), b_star_c()], vocab_size=6)
    assert int(tables.num_constraints) == 3
    with pytest.raises(TableFormatError):
        ConstraintTables.from_dfas(tmp_path / "missing.npz", vocab_size=6)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"vocab_size": 0}, "vocab_size: expected a positive int"),
        ({"vocab_size": 6, "eos_ids": [9]}, r"eos_ids: expected ids in \[0, 6\)"),
        ({"vocab_size": 6, "mask_impl": "dense"}, "mask_impl: expected one of"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(RuntimeShapeError, match=match):
        ConstraintTables.from_dfas(toy_dfa(), **kwargs)


def test_no_dfas_needs_eos_ids():
    with pytest.raises(RuntimeShapeError, match="at least one EOS id"):
        ConstraintTables.from_dfas([], vocab_size=6)
    tables = ConstraintTables.from_dfas([], vocab_size=6, eos_ids=[EOS])
    assert int(tables.num_constraints) == 0 and tables.padded_shape == (1, 8, 8)


def test_bitmask_rows_equal_gather_masks():
    dfas = [toy_dfa(), b_star_c()]
    tables = ConstraintTables.from_dfas(dfas, vocab_size=40, mask_impl="bitmask")
    assert tables.mask_impl == "bitmask"
    bits = np.asarray(tables.mask_bits)
    rows = np.asarray(tables.mask_row)
    assert bits.shape == (8, 2) and bits.dtype == np.uint32
    unpacked = ((bits[:, :, None] >> np.arange(32, dtype=np.uint32)) & 1).reshape(8, -1)[:, :40]
    for k, dfa in enumerate(dfas):
        for q in range(dfa.num_states):
            expected = np.zeros(40, bool)
            expected[:6] = dfa.next_state[q][dfa.token_class] >= 0
            np.testing.assert_array_equal(unpacked[rows[k, q]].astype(bool), expected)
    assert not unpacked[0].any()  # row 0: nothing (padding)
    # (ab)+c? state 3 and b*c state 1 allow nothing: deduplicated into row 0.
    assert rows[0, 3] == rows[1, 1] == 0


# -- a fixed capacity (issue 20) ----------------------------------------------------------------


def _leaves(tables):
    return {k: np.asarray(v) for k, v in vars(tables).items() if hasattr(v, "shape")}


def test_capacity_fixes_every_shape_and_keeps_the_tables():
    from automata_jax import TableCapacity

    cap = TableCapacity(states=16, classes=8, constraints=2, forced=4)
    a = ConstraintTables.from_dfas(toy_dfa(), vocab_size=8, capacity=cap)
    b = ConstraintTables.from_dfas([b_star_c(), toy_dfa()], vocab_size=8, capacity=cap)
    assert a.capacity == b.capacity == cap
    assert jax.tree.structure(a) == jax.tree.structure(b)
    assert jax.tree.map(np.shape, a) == jax.tree.map(np.shape, b)
    assert a.padded_shape == (2, 16, 8)
    # the real part is what bucketing gives
    plain = ConstraintTables.from_dfas(toy_dfa(), vocab_size=8)
    ns = np.asarray(a.next_state)
    np.testing.assert_array_equal(ns[0, :8, :8], np.asarray(plain.next_state)[0])
    assert (ns[0, 8:] == -1).all() and (ns[1] == -1).all()
    assert not np.asarray(a.viable)[1].any() and int(a.num_constraints) == 1


def test_capacity_of_bucketed_tables_rebuilds_the_same_tree():
    t = ConstraintTables.from_dfas([toy_dfa(), b_star_c()], vocab_size=8, mask_impl="bitmask")
    again = ConstraintTables.from_dfas(
        [b_star_c()], vocab_size=8, mask_impl="bitmask", capacity=t.capacity
    )
    assert jax.tree.structure(t) == jax.tree.structure(again)
    assert jax.tree.map(np.shape, t) == jax.tree.map(np.shape, again)


def test_a_constraint_past_the_capacity_names_the_dimension():
    from automata_jax import TableCapacity, TableCapacityError

    with pytest.raises(
        TableCapacityError, match=r"constraint #0 .*needs states=4, but capacity.states is 2"
    ):
        ConstraintTables.from_dfas(toy_dfa(), vocab_size=8, capacity=TableCapacity(2, 8))
    with pytest.raises(TableCapacityError, match="needs classes=5, but capacity.classes is 4"):
        ConstraintTables.from_dfas(toy_dfa(), vocab_size=8, capacity=TableCapacity(8, 4))
    with pytest.raises(TableCapacityError, match="2 constraints, but capacity.constraints is 1"):
        ConstraintTables.from_dfas(
            [toy_dfa(), b_star_c()], vocab_size=8, capacity=TableCapacity(8, 8)
        )
    with pytest.raises(TableCapacityError, match="capacity.mask_rows is 1"):
        ConstraintTables.from_dfas(
            toy_dfa(), vocab_size=8, mask_impl="bitmask", capacity=TableCapacity(8, 8, mask_rows=1)
        )
    assert issubclass(TableCapacityError, RuntimeShapeError)


def test_a_grammar_needs_a_capacity_with_a_stack():
    import automata_compile as ac
    from automata_jax import TableCapacity, TableCapacityError

    vocab = ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )
    pda = ac.compile_grammar('start: "(" start ")" | "x"', vocab)
    with pytest.raises(TableCapacityError, match="capacity.stack is 0"):
        ConstraintTables.from_dfas(pda, vocab_size=257, capacity=TableCapacity(64, 64))
    cap = TableCapacity.fitting([pda])
    assert cap.stack == 64 and cap.states >= pda.num_states
    with pytest.raises(TableCapacityError, match="context_edges"):
        ConstraintTables.from_dfas(
            pda, vocab_size=257, capacity=dataclasses.replace(cap, context_edges=0)
        )
    t = ConstraintTables.from_dfas(pda, vocab_size=257, capacity=cap)
    assert t.has_stack and t.stack_size == 64 and t.capacity == cap


def test_forced_runs_are_cut_to_the_capacity():
    import automata_compile as ac
    from automata_jax import TableCapacity

    vocab = ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )
    dfa = ac.compile_regex("abcdefgh(x|y)", vocab)
    assert int(dfa.forced_len.max()) == 8
    full = ConstraintTables.from_dfas(dfa, vocab_size=257)
    cut = ConstraintTables.from_dfas(
        dfa, vocab_size=257, capacity=TableCapacity(states=16, classes=16, forced=2)
    )
    assert np.asarray(cut.forced_tokens).shape[2] == 2
    q = dfa.num_states
    np.testing.assert_array_equal(
        np.asarray(cut.forced_len)[0, :q], np.minimum(np.asarray(full.forced_len)[0, :q], 2)
    )
    np.testing.assert_array_equal(
        np.asarray(cut.forced_tokens)[0, :q], np.asarray(full.forced_tokens)[0, :q, :2]
    )
    np.testing.assert_array_equal(
        np.asarray(cut.forced_states)[0, :q], np.asarray(full.forced_states)[0, :q, :2]
    )
    none = ConstraintTables.from_dfas(dfa, vocab_size=257, capacity=TableCapacity(16, 16))
    assert none.forced_tokens is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"states": 0, "classes": 8}, r"TableCapacity.states: expected an int >= 1"),
        ({"states": 8, "classes": True}, r"TableCapacity.classes"),
        ({"states": 8, "classes": 8, "stack": 4, "pops": 0}, "needs pushes, push_len and pops"),
    ],
)
def test_bad_capacity(kwargs, match):
    from automata_jax import TableCapacity

    with pytest.raises(RuntimeShapeError, match=match):
        TableCapacity(**kwargs)
    with pytest.raises(RuntimeShapeError, match="leave them at their defaults"):
        ConstraintTables.from_dfas(
            toy_dfa(), vocab_size=8, min_states=16, capacity=TableCapacity(8, 8)
        )
    hash(TableCapacity(8, 8))


# -- exit tokens (issue 22) ---------------------------------------------------------------------


def _exit_oracle(dfa: TokenDFA, vocab_size: int) -> list[int]:
    """Brute force of `_table_build.exit_tables` over every token of every state."""
    eos = set(dfa.eos_ids)
    tc = np.asarray(dfa.token_class)
    ids = [t for t in range(min(vocab_size, tc.shape[0])) if t not in eos]

    def allowed(q):
        return [t for t in ids if dfa.next_state[q, tc[t]] >= 0]

    def end_of_run(q):
        for t in dfa.forced_tokens[q, : dfa.forced_len[q]]:
            q = dfa.next_state[q, tc[t]]
        return q

    exits = []
    for q in range(dfa.num_states):
        cands = []  # (token, tokens to the end of its run, the state there)
        for t in allowed(q):
            nxt = dfa.next_state[q, tc[t]]
            n = int(dfa.forced_len[nxt])
            if n or (dfa.accepting[nxt] and not allowed(nxt)):
                cands.append((t, 1 + n, end_of_run(nxt)))
        if not cands:
            exits.append(-1)
            continue
        _, _, target = max(cands, key=lambda c: (c[1], -c[0]))
        exits.append(min((n, t) for t, n, end in cands if end == target)[1])
    return exits


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "object", "properties": {"a": {"type": "integer"}, "bc": {"enum": ["x", "yz"]},
                                          "d": {"type": "boolean"}},
         "required": ["a", "bc", "d"], "additionalProperties": False},
        {"type": "array", "items": {"enum": ["ab", "a", "b"]}, "maxItems": 3},
        r"(ab|a)(\",\"|c){1,3}(\"}|,\"q)",
        r"x*(\":\"ab|\":\"a|yy)z",
    ],
)  # fmt: skip
def test_exit_tokens_match_a_brute_force_with_ties(spec):
    """Any order, unions and repeats: states with several candidates, reaches shared by
    tokens of different lengths, and states whose candidates reach different states."""
    import automata_compile as ac

    pieces = [bytes([i]) for i in range(256)] + [b'","', b'",', b'":"', b'"}', b',"', b"ab",
                                                 b'":', b"yz", b'"a', b'{"', b'"]', b'true']  # fmt: skip
    vocab = ac.Vocabulary.from_bytes(pieces + [b"<eos>"], eos_ids=[len(pieces)],
                                     special_ids=[len(pieces)])  # fmt: skip
    if isinstance(spec, str):
        dfa = ac.compile_regex(spec, vocab)
    else:
        dfa = ac.compile_json_schema(spec, vocab, whitespace="compact")
    tables = ConstraintTables.from_dfas(dfa, vocab_size=vocab.size)
    assert tables.exit_tokens is not None
    exits = np.asarray(tables.exit_tokens)[0]
    assert exits[: dfa.num_states].tolist() == _exit_oracle(dfa, vocab.size)
    assert (exits[dfa.num_states :] == -1).all()


def test_exit_tokens_match_a_brute_force():
    import automata_compile as ac
    from automata_jax import TableCapacity

    pieces = [bytes([i]) for i in range(256)] + [b'","', b'",', b'":"', b'"}', b',"', b"ab"]
    vocab = ac.Vocabulary.from_bytes(pieces + [b"<eos>"], eos_ids=[len(pieces)],
                                     special_ids=[len(pieces)])  # fmt: skip
    v = vocab.size
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"type": "integer"},
                       "c": {"type": "string", "maxLength": 2}},
        "required": ["a", "b", "c"],
        "additionalProperties": False,
    }  # fmt: skip
    dfas = [
        ac.compile_json_schema(schema, vocab, whitespace="compact", property_order="declared"),
        ac.compile_regex(r"x(ab|c)*,yz(q|r)", vocab),
        ac.compile_regex(r"[a-c]{0,3}", vocab),  # forces nothing: exits end the text
    ]
    tables = ConstraintTables.from_dfas(dfas, vocab_size=v)
    exits = np.asarray(tables.exit_tokens)
    assert exits.shape == tables.next_state.shape[:2]
    for k, dfa in enumerate(dfas):
        q = dfa.num_states
        assert exits[k, :q].tolist() == _exit_oracle(dfa, v), k
        assert (exits[k, q:] == -1).all()
    assert (exits[len(dfas) :] == -1).all()
    assert pieces[exits[2, dfas[2].walk([97])]] == b"ab"  # "a" + "ab": nothing but EOS
    # inside a string value followed by a key, the exit is the merged '","'
    q = dfas[0].walk(vocab.encode('{"a":"x'))
    assert pieces[exits[0, q]] == b'","'
    # a capacity keeps the shape (and drops the array with the forced runs)
    cap = TableCapacity(states=64, classes=64, constraints=4, forced=8)
    fixed = ConstraintTables.from_dfas(dfas[1:], vocab_size=v, capacity=cap)
    assert np.asarray(fixed.exit_tokens).shape == (4, 64)
    np.testing.assert_array_equal(np.asarray(fixed.exit_tokens)[:2], exits[1:3, :64])
    none = ConstraintTables.from_dfas(dfas[1], vocab_size=v, capacity=TableCapacity(64, 64))
    assert none.exit_tokens is None and none.forced_tokens is None


def test_structure_drafts_are_the_dfas_padded_and_keep_one_structure():
    """`ConstraintTables.structure_drafts`: each DFA's `structure_draft` padded with -1, all
    -1 for a DFA compiled without one (an older artifact), built with the forced runs so
    that tables of one capacity share one pytree structure (no retrace)."""
    import automata_compile as ac
    from automata_jax import TableCapacity

    pieces = [bytes([i]) for i in range(256)] + [b'":"', b'":"",', b',"']
    vocab = ac.Vocabulary.from_bytes(pieces + [b"<eos>"], eos_ids=[len(pieces)],
                                     special_ids=[len(pieces)])  # fmt: skip
    v = vocab.size
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"type": "string"},
                       "c": {"type": "integer"}},
        "required": ["a", "b", "c"],
        "additionalProperties": False,
    }  # fmt: skip
    json_dfa = ac.compile_json_schema(
        schema, vocab, whitespace="compact", property_order="declared"
    )
    regex = ac.compile_regex(r"x(ab|c)*,yz(q|r)", vocab)
    assert (json_dfa.structure_draft >= 0).any()
    old = dataclasses.replace(json_dfa, structure_draft=None)
    tables = ConstraintTables.from_dfas([json_dfa, regex, old], vocab_size=v)
    drafts = np.asarray(tables.structure_drafts)
    assert drafts.shape == tables.next_state.shape[:2]
    q = json_dfa.num_states
    np.testing.assert_array_equal(drafts[0, :q], json_dfa.structure_draft)
    np.testing.assert_array_equal(drafts[1, : regex.num_states], regex.structure_draft)
    assert (drafts[0, q:] == -1).all() and (drafts[2] == -1).all() and (drafts[3:] == -1).all()
    assert pieces[drafts[0, json_dfa.walk(vocab.encode('{"a":"x","b'))]] == b'":"'
    cap = TableCapacity(states=256, classes=64, constraints=2, forced=8)
    one = ConstraintTables.from_dfas([json_dfa], vocab_size=v, capacity=cap)
    other = ConstraintTables.from_dfas([old, regex], vocab_size=v, capacity=cap)
    assert jax.tree.structure(one) == jax.tree.structure(other)
    assert [a.shape for a in jax.tree.leaves(one)] == [a.shape for a in jax.tree.leaves(other)]


def test_context_edges_are_a_run_per_state(byte_level_vocab):
    """Each state's context-dependent edges on the device are the ``cd_count`` edges from
    ``cd_first`` (O(Q) memory, not a [Q, E] index padded to the busiest state), exactly
    the TokenDFA's edges of that state; ``edges_per_state`` bounds the window."""
    import automata_compile as ac
    from automata_jax._tables import TableCapacity

    dfa = ac.compile_grammar('start: "[" (item ("," item)*)? "]"\nitem: /[a-c]+/ | start',
                             byte_level_vocab)  # fmt: skip
    assert dfa.is_pda and dfa.cd_state.size
    tables = ConstraintTables.from_dfas(dfa, vocab_size=byte_level_vocab.size)
    first, count = np.asarray(tables.cd_first[0]), np.asarray(tables.cd_count[0])
    assert first.shape == count.shape == (tables.padded_shape[1],)
    cd_class = np.asarray(tables.cd_class[0])
    for q in range(dfa.num_states):
        ids = np.flatnonzero(dfa.cd_state == q)
        assert count[q] == ids.size
        assert ids.size == 0 or first[q] == ids[0]
        np.testing.assert_array_equal(cd_class[first[q] : first[q] + count[q]], dfa.cd_class[ids])
    assert not count[dfa.num_states :].any()  # padded states: none
    assert tables.edges_per_state >= count.max()
    assert isinstance(tables.capacity, TableCapacity)
    assert tables.capacity.edges_per_state == tables.edges_per_state


def test_viable_states_of_blocks_equal_the_dense_ones(byte_level_vocab):
    """``viable`` (accepting, or some token allowed) read from state blocks' flat rows
    equals the dense tables'."""
    import automata_compile as ac
    from automata_compile.tokens._blocks import split_blocks

    dfa = ac.compile_grammar('start: "(" start ")" | "ab" | "a" "c"', byte_level_vocab)
    rng = np.random.default_rng(3)
    for _ in range(4):
        split = split_blocks(dfa, rng.integers(0, 4, dfa.num_states))
        a = ConstraintTables.from_dfas(dfa, vocab_size=byte_level_vocab.size)
        b = ConstraintTables.from_dfas(split, vocab_size=byte_level_vocab.size)
        assert b.class_map is not None
        q = dfa.num_states
        np.testing.assert_array_equal(np.asarray(a.viable)[0, :q], np.asarray(b.viable)[0, :q])
        assert not np.asarray(b.viable)[0, q:].any()
