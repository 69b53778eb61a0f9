"""`canonical_bpe`: the BPE pair test, against the ``tokenizers`` library.

Exhaustive over every pair of a small trained BPE (no pre-tokenizer), on merge lists in
training order and shuffled (ranks out of training order, as Gemma-3's); the refusals
(Llama-3's regex pre-tokenizer) name why. The full Gemma-3 comparison on the device lives in
tests/runtime/test_canonical.py.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from automata_compile import CanonicalError, canonical_bpe
from automata_compile.tokens._canonical import pair_canonical

tokenizers = pytest.importorskip("tokenizers")

CORPUS = [
    "the cat sat on the mat; the hat is that flat",
    "aaaa abab baba llama hello hallo ll lll",
    "----====----  ,,;; tattle tale",
] * 20


def _trained(tmp_path, shuffle: int | None):
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=120, show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    obj = json.loads(tok.to_str())
    if shuffle is not None:  # ranks out of training order
        merges = obj["model"]["merges"]
        random.Random(shuffle).shuffle(merges)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(obj))
    return path, tokenizers.Tokenizer.from_file(str(path))


@pytest.mark.parametrize("shuffle", [None, 0, 1])
def test_pair_test_equals_the_tokenizer_on_every_pair(tmp_path, shuffle):
    path, tok = _trained(tmp_path, shuffle)
    bpe = canonical_bpe(path)
    v = bpe.vocab_size
    piece = tok.id_to_token  # no decoder: a token's text is its piece
    alone = [tok.encode(piece(t), add_special_tokens=False).ids == [t] for t in range(v)]
    assert all(alone[t] for t in np.flatnonzero(bpe.ok))  # kept tokens are canonical alone
    ok = [int(t) for t in np.flatnonzero(bpe.ok)]
    ruled_out = 0
    for a in ok:
        for b in ok:
            truth = tok.encode(piece(a) + piece(b), add_special_tokens=False).ids == [a, b]
            assert pair_canonical(bpe, a, b) == truth, (piece(a), piece(b))
            ruled_out += not truth
    assert ruled_out > 20  # the comparison can fail
    if shuffle is None:  # in training order every canonical token is kept
        assert sum(alone) == int(bpe.ok.sum())


def test_llama3_regex_pretokenizer_is_refused(llama3_tokenizer_path):
    # "  " + "x" encodes as " " + " x": the regex split, not the merges, decides
    with pytest.raises(CanonicalError, match="splitting pre-tokenizer"):
        canonical_bpe(llama3_tokenizer_path)


def test_not_bpe_is_refused(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"type": "WordLevel", "vocab": {"a": 0}}}))
    with pytest.raises(CanonicalError, match="needs a BPE model"):
        canonical_bpe(path)


def test_on_disk_cache_round_trips_and_is_keyed_by_content(tmp_path, monkeypatch):
    from automata_compile.tokens import _canonical

    path, _ = _trained(tmp_path, 0)
    cache = tmp_path / "cache"
    first = canonical_bpe(path, cache_dir=cache)
    files = list((cache / "canonical").glob("*.npz"))
    assert len(files) == 1
    with np.load(files[0], allow_pickle=False) as z:  # no pickle inside
        assert z["meta"][0] == _canonical.CACHE_FORMAT
    built = []
    monkeypatch.setattr(_canonical, "_build", lambda *a: built.append(a) or first)
    again = canonical_bpe(path, cache_dir=cache)  # loaded, not rebuilt
    assert not built
    for f in _canonical._FIELDS:
        assert np.array_equal(getattr(first, f), getattr(again, f)), f
    assert again.vocab_size == first.vocab_size
    canonical_bpe(path, 200, cache_dir=cache)  # another V: another file
    assert len(built) == 1
    monkeypatch.setattr(_canonical, "CACHE_FORMAT", "automata_compile/canonical-bpe/v0")
    canonical_bpe(path, cache_dir=cache)  # another format: ignored and rewritten
    assert len(built) == 2
    path.write_text(path.read_text().replace('"vocab"', '"vocab" ', 1))  # new content
    canonical_bpe(path, cache_dir=cache)
    assert len(built) == 3
    assert len(list((cache / "canonical").glob("*.npz"))) == 3
