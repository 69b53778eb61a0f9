"""Token healing at the prompt boundary, on the device.

A prompt that ends inside a word or on a separator (``"Arguments: "``, ``'{"na'``) ends
in a token the tokenizer would not have produced had the text continued: the model never
saw ``" "`` followed by ``"{"``, only ``" {"``. Healing (Guidance's token healing;
Cognetta et al. 2025, §4.4) backs the last prompt token off and makes generation start
with its bytes: the first generated token must begin with the backed-off bytes ``h``, and
the rest of that token, and everything after it, must continue the row's constraint.

Two parts:

* on the host, `heal_prompts` drops the last ``back`` tokens of each prompt and returns
  their bytes (a prompt-side preprocessing step, with the vocabulary's token bytes);
* on the device, `heal_step` (called by `generate` after the prefill) masks the first
  token: token ``t`` is allowed for a row healing ``h`` iff ``bytes(t)`` starts with
  ``h`` and the rest ``w = bytes(t)[len(h):]`` keeps the row's constraint alive from its
  start state. ``w`` is walked byte by byte through the tables with single-byte tokens
  (`TokenHealing.byte_token`): in a token DFA the state after a token sequence depends
  only on its bytes, so this walk gives the state the row is in after ``t``, exactly.
  The walk is vectorized over the vocabulary and stops as soon as no token is alive.
  Then the token is fed to the model and decoding goes on as usual.

Exactness: with healing, a row's outputs are exactly ``h`` followed by its constraint's
language, where ``h`` lies inside the first token (Guidance's rule; ``h`` is itself a
token, so the first token can always be ``h``; splitting ``h`` over several generated
tokens is not offered). Rows with nothing to heal (``heal_len == 0``) decode as without
healing. Grammar (PDA) constraints are not supported (their walk needs the stack):
`generate` refuses healing for tables with a stack.

`generate`'s output then starts with ``h``: strip ``heal_len`` bytes from the decoded
text (`strip_healed`).
"""

# ruff: noqa: F722 (jaxtyping shape strings such as "B V" are not Python expressions)

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jaxtyping import Array, Int, UInt8

from automata_jax import _layout
from automata_jax._constraint import ConstraintState, advance, allowed_mask
from automata_jax._errors import RuntimeShapeError
from automata_jax._tables import ConstraintTables

MAX_HEAL = 16  # H: the most bytes backed off per row (static width of `heal_bytes`)


@struct.dataclass(kw_only=True)
class TokenHealing:
    """What `generate` needs to heal each row's prompt boundary (a pytree).

    Attributes:
      token_bytes: uint8[V, L], each token's bytes, zero-padded (L = the longest token).
      token_len: int32[V], bytes per token (0 for special tokens and ids past the
        vocabulary).
      byte_token: int32[256], a token id whose bytes are that single byte.
      heal_bytes: uint8[B, H], each row's backed-off bytes, zero-padded.
      heal_len: int32[B], how many (0 = the row does not heal).
    """

    token_bytes: UInt8[Array, "V L"]
    token_len: Int[Array, " V"]
    byte_token: Int[Array, " 256"]
    heal_bytes: UInt8[Array, "B H"]
    heal_len: Int[Array, " B"]


def heal_prompts(
    prompts: Sequence[Sequence[int]],
    tokens: Sequence[bytes | None],
    *,
    vocab_size: int,
    back: int = 1,
) -> tuple[list[list[int]], TokenHealing]:
    """Backs off the last ``back`` tokens of each prompt (host side).

    Args:
      prompts: one list of token ids per row.
      tokens: the vocabulary's bytes per token id (``Vocabulary.tokens``; None for special
        tokens, which are never backed off).
      vocab_size: V, the model's logits width (the tables').
      back: tokens to back off per row (at most as many bytes as `MAX_HEAL`; a row stops
        backing off at a special token, at its first token, or where the bytes would
        exceed `MAX_HEAL`).

    Returns:
      (the shortened prompts, the `TokenHealing` for `generate`).

    Raises:
      RuntimeShapeError: ``back`` < 0, no prompts, or a vocabulary without a token for
        some single byte.

    Example:
      >>> vocab = [b"a", b"b", b"ab", None] + [bytes([i]) for i in range(256)]
      >>> short, healing = heal_prompts([[0, 2]], vocab, vocab_size=len(vocab))
      >>> short, healing.heal_len.tolist(), bytes(healing.heal_bytes[0, :2].tolist())
      ([[0]], [2], b'ab')
    """
    if back < 0:
        raise RuntimeShapeError(f"back: expected an int >= 0, got {back}")
    if not prompts:
        raise RuntimeShapeError("prompts: expected at least one prompt, got none")
    short, healed = [], []
    for p in prompts:
        p = list(p)
        h = b""
        for _ in range(back):
            if len(p) <= 1:
                break
            t = tokens[p[-1]] if 0 <= p[-1] < len(tokens) else None
            if not t or len(t) + len(h) > MAX_HEAL:
                break
            h = t + h
            p.pop()
        short.append(p)
        healed.append(h)
    heal_bytes = np.zeros((len(prompts), MAX_HEAL), np.uint8)
    for i, h in enumerate(healed):
        heal_bytes[i, : len(h)] = list(h)
    heal = vocabulary_bytes(tokens, vocab_size)
    return short, heal.replace(
        heal_bytes=jnp.asarray(heal_bytes),
        heal_len=jnp.asarray([len(h) for h in healed], jnp.int32),
    )


def vocabulary_bytes(tokens: Sequence[bytes | None], vocab_size: int) -> TokenHealing:
    """The vocabulary part of a `TokenHealing` (no row heals); build it once per vocabulary."""
    v = int(vocab_size)
    lengths = np.zeros(v, np.int32)
    longest = max((len(t) for t in tokens[:v] if t), default=1)
    matrix = np.zeros((v, longest), np.uint8)
    byte_token = np.full(256, -1, np.int32)
    for i, t in enumerate(tokens[:v]):
        if not t:
            continue
        lengths[i] = len(t)
        matrix[i, : len(t)] = np.frombuffer(t, np.uint8)
        if len(t) == 1 and byte_token[t[0]] < 0:
            byte_token[t[0]] = i
    missing = np.flatnonzero(byte_token < 0)
    if missing.size:
        raise RuntimeShapeError(
            f"tokens: healing needs a token for every single byte; none for byte "
            f"{int(missing[0]):#04x} among the first {v} ids"
        )
    return TokenHealing(
        token_bytes=jnp.asarray(matrix),
        token_len=jnp.asarray(lengths),
        byte_token=jnp.asarray(byte_token),
        heal_bytes=jnp.zeros((1, MAX_HEAL), jnp.uint8),
        heal_len=jnp.zeros((1,), jnp.int32),
    )


def strip_healed(text: bytes, heal_len: int) -> bytes:
    """The generated text without the healed prompt bytes it starts with."""
    return text[int(heal_len) :]


def check(healing: TokenHealing, tables: ConstraintTables, batch: int) -> None:
    """Raises before tracing when ``healing`` does not fit the batch and the tables."""
    if not isinstance(healing, TokenHealing):
        raise RuntimeShapeError(
            f"healing: expected TokenHealing (from heal_prompts), got {type(healing).__name__}"
        )
    if tables.has_stack:
        raise RuntimeShapeError(
            "healing: token healing supports DFA constraints only; these tables hold a grammar "
            "(a stack); decode grammar rows without healing"
        )
    if tables.bitset is not None:
        raise RuntimeShapeError(
            "healing: token healing supports DFA constraints only; these tables hold a bitset "
            "any-order constraint (ConstraintTables.from_bitset); decode it without healing"
        )
    if healing.heal_len.shape != (batch,):
        raise RuntimeShapeError(
            f"healing.heal_len: expected shape [{batch}] (one per prompt row), got "
            f"{list(healing.heal_len.shape)}"
        )
    if healing.token_len.shape[0] != tables.vocab_size:
        raise RuntimeShapeError(
            f"healing: expected a vocabulary of {tables.vocab_size} ids (the tables'), got "
            f"{healing.token_len.shape[0]}"
        )


def heal_mask(
    tables: ConstraintTables, state: ConstraintState, healing: TokenHealing
) -> tuple[jax.Array, jax.Array]:
    """(bool[B, V] allowed first tokens, int32[B, V] the DFA state after each) of healing
    rows (rows with ``heal_len == 0`` get the ordinary mask; their states are unused)."""
    tb, tl, hb, hl = healing.token_bytes, healing.token_len, healing.heal_bytes, healing.heal_len
    b = hl.shape[0]
    v, width = tb.shape
    # bytes(t) starts with h: compare the first H bytes.
    h = hb.shape[1]
    cols = tb[:, :h] if width >= h else jnp.pad(tb, ((0, 0), (0, h - width)))
    j = jnp.arange(h)[None, None, :]
    same = (cols[None, :, :] == hb[:, None, :]) | (j >= hl[:, None, None])
    match = jnp.all(same, axis=2) & (tl[None, :] >= hl[:, None])  # [B, V]
    # Walk the rest of each token from the row's start state, byte by byte.
    num_k, num_q, _ = tables.padded_shape
    k = jnp.clip(state.constraint, 0, num_k - 1)
    constrained = state.constraint >= 0
    q0 = jnp.broadcast_to(jnp.clip(state.state, 0, num_q - 1)[:, None], (b, v))
    alive0 = match & constrained[:, None]
    ragged = _layout.is_ragged(tables)  # state blocks: the class map follows the state
    if not ragged:
        byte_class = tables.token_class[k][:, healing.byte_token]  # [B, 256]

    def cond(carry):
        i, q, alive = carry
        return (i < width) & jnp.any(alive & (hl[:, None] + i < tl[None, :]))

    def body(carry):
        i, q, alive = carry
        pos = hl[:, None] + i  # [B, 1]
        inside = pos < tl[None, :]
        byte = tb[:, jnp.clip(pos[:, 0], 0, width - 1)].T  # [B, V]: byte pos of each token
        if ragged:
            tok = healing.byte_token[byte.astype(jnp.int32)]
            cls = _layout.token_classes(tables, k[:, None], q, tok)
        else:
            cls = jnp.take_along_axis(byte_class, byte.astype(jnp.int32), axis=1)
        nxt = _layout.cell(tables, tables.next_state, k[:, None], q, cls)
        step = alive & inside
        q = jnp.where(step, jnp.maximum(nxt, 0), q)
        alive = alive & (~inside | (nxt >= 0))
        return i + 1, q, alive

    _, q, alive = jax.lax.while_loop(cond, body, (jnp.int32(0), q0, alive0))
    viable = tables.viable[k[:, None], q]
    heal_ok = jnp.where(constrained[:, None], alive & viable, match)
    heal_ok = heal_ok & ~tables.eos_mask[None, :] & (tl[None, :] > 0)
    plain = allowed_mask(tables, state)
    healing_row = (hl > 0) & ~state.done
    return jnp.where(healing_row[:, None], heal_ok, plain), q


def heal_step(
    *, tables, state, logits, healing, sampler, rng, pad_id
) -> tuple[jax.Array, ConstraintState]:
    """Samples each row's first token under the healing mask; returns (int32[B] tokens,
    the state after them). A healing row with no allowed token fails (``error``)."""
    mask, q_after = heal_mask(tables, state, healing)
    neg = jnp.asarray(-jnp.inf, logits.dtype)
    token = sampler(jnp.where(mask, logits, neg), rng).astype(jnp.int32)
    emitted = ~state.done
    token = jnp.where(emitted, token, pad_id)
    plain = advance(tables, state, token)
    healing_row = (healing.heal_len > 0) & emitted
    none = ~jnp.any(mask, axis=1)
    t = jnp.clip(token, 0, tables.vocab_size - 1)
    q_t = jnp.take_along_axis(q_after, t[:, None], axis=1)[:, 0]
    constrained = state.constraint >= 0
    healed = ConstraintState(
        state=jnp.where(constrained, q_t, state.state),
        constraint=state.constraint,
        done=state.done | none,
        error=state.error | none,
        stack=state.stack,
        depth=state.depth,
    )
    new = jax.tree.map(lambda a, c: jnp.where(_rows(healing_row, a), a, c), healed, plain)
    token = jnp.where(healing_row & none, pad_id, token)
    return token, new


def _rows(flags, like):
    return flags.reshape(flags.shape + (1,) * (like.ndim - 1))
