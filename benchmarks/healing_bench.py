"""Cost of token healing's first-token mask next to the plain mask (Gemma-3 vocabulary, B = 8).

Healing adds no model call: the healed first token replaces the first sampled token. Its cost
is one `heal_mask` (a prefix compare over the vocabulary and a byte walk of the tokens that
match) instead of one `allowed_mask`, once per batch. Both are timed here, jitted, side by
side, on a BFCL schema compiled for the Gemma-3 vocabulary, with prompts ending in ``": "``
(h = " ": 137k of the 262k tokens start with a space) and mid-word.

    PYTHONPATH=.:compile JAX_PLATFORMS=cpu python benchmarks/healing_bench.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _bfcl  # noqa: E402
from _bench_util import median_call_s  # noqa: E402

import automata_compile as ac  # noqa: E402
import automata_jax as aj  # noqa: E402
from automata_jax import _healing  # noqa: E402

TOKENIZER = Path(__file__).resolve().parents[2] / "shared/tokenizers/gemma3/tokenizer.json"


def _median_ms(fn, *args, reps=15):
    return 1e3 * median_call_s(fn, *args, reps=reps)


def main():
    vocab = ac.Vocabulary.from_tokenizer_json(TOKENIZER)
    v = 262_144
    case = _bfcl.load_cases("simple_python", limit=1)[0]
    dfa = ac.compile_json_schema(_bfcl.parameters_schema(case.functions[0]), vocab)
    tables = aj.ConstraintTables.from_dfas([dfa], vocab_size=v, eos_ids=[1, 106])
    b = 8
    state = aj.init_state(tables, jnp.zeros((b,), jnp.int32))
    plain = jax.jit(aj.allowed_mask)
    healed = jax.jit(_healing.heal_mask)
    for text in ("Arguments: ", "The city of Par"):
        ids = vocab.encode(text)
        _, heal = aj.heal_prompts([ids] * b, vocab.tokens, vocab_size=v)
        h = bytes(heal.heal_bytes[0, : int(heal.heal_len[0])].tolist())
        t_plain = _median_ms(plain, tables, state)
        t_heal = _median_ms(healed, tables, state, heal)
        print(
            f"prompt ending {text[-6:]!r} (h = {h!r}): allowed_mask {t_plain:.1f} ms, "
            f"heal_mask {t_heal:.1f} ms (x{t_heal / t_plain:.1f}), once per batch"
        )


if __name__ == "__main__":
    main()
