"""ConstraintTables: padding, bucketing, vocabulary checks, artifacts, bitmasks."""

from __future__ import annotations

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
