"""`generate`: prefill, then a `jax.lax.while_loop` of constrained decode steps, in one jit.

The model is a pair of pure functions (the contract `automata_jax.models` follows)::

    cache = init_cache(batch_size, max_length)            # any pytree
    logits, cache = step_fn(params, tokens, positions, input_mask, cache)
    # tokens, positions: int32[B, T]; input_mask: bool[B, T]; logits: float[B, T, V]

A ``step_fn`` with a ``logits_at`` keyword (int32[B], one slot per row; logits [B, 1, V], as
`automata_jax.models.Gemma3.apply_step`) computes only the logits the loop uses: the prefill's
last slot, and each fast-forward chunk's last fed slot. The prefill of a 262k-vocabulary model
then skips its output layer on every other prompt slot. The step declares it
(``step_fn.takes_logits_at = True``; `automata_jax._fast_forward.accepts_logits_at`), and may
declare ``defers_cache_write`` (`automata_jax._loop.defers_cache_write`).

Nothing per token runs on the host: masking, sampling and the DFA step are device
gathers inside the loop. Configuration (the step function, the sampler, the output
buffer length) is static; tables, rng and ``max_new_tokens`` are traced, so a new
constraint set of the same bucket or a different ``max_new_tokens`` within the same
buffer bucket reuses the compiled loop.
"""

# ruff: noqa: F722 (jaxtyping shape strings such as "B V" are not Python expressions)

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jaxtyping import Array, Bool, Int

from automata_jax import _canonical, _fast_forward, _healing, _speculative
from automata_jax._constraint import (
    ConstraintState,
    advance,
    allowed_mask,
    check_constraint_ids,
    init_state,
    is_concrete,
    mask_logits,
)
from automata_jax._errors import RuntimeDtypeError, RuntimeShapeError
from automata_jax._loop import LoopConfig, LoopInputs, LoopStart
from automata_jax._sampling import Sampler
from automata_jax._tables import ConstraintTables, bucket

StepFn = Callable[..., tuple[jax.Array, Any]]
MIN_BUFFER = 16


@struct.dataclass(kw_only=True)
class GenerateOutput:
    """What `generate` returns (a pytree).

    Attributes:
      tokens: int32[B, max_new_tokens]; after a row's end (its EOS, or the token that
        made it fail) every slot holds ``pad_id``.
      lengths: int32[B], generated tokens per row, not counting EOS.
      states: the final `ConstraintState` (``done``/``error`` per row).
      accepted: bool[B], the row finished with EOS from an accepting state (for an
        unconstrained row: finished with EOS); False for rows cut off by
        ``max_new_tokens`` and for failed rows.
      model_calls: int32[B], forward passes whose logits the row sampled from (the
        prefill included): the calls the row would need decoded alone. Without
        fast-forward this is its sampled tokens (EOS included); with it, fewer.
      drafted: int32[B], with ``speculate``: draft tokens the row fed to the model (else 0).
      drafts_accepted: int32[B], with ``speculate``: those drafts it kept (else 0).
      canonical_fallbacks: int32[B], with ``canonical``: steps where the constraint allowed
        no canonical token and the row sampled under the constraint mask alone (else 0).
    """

    tokens: Int[Array, "B N"]
    lengths: Int[Array, " B"]
    states: ConstraintState
    accepted: Bool[Array, " B"]
    model_calls: Int[Array, " B"]
    drafted: Int[Array, " B"] | None = None
    drafts_accepted: Int[Array, " B"] | None = None
    canonical_fallbacks: Int[Array, " B"] | None = None


def pad_prompts(
    prompts: Sequence[Sequence[int]], pad_id: int = 0, *, length: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Left-pads token-id lists into ``(tokens int32[B, T], mask bool[B, T])``.

    Args:
      prompts: one non-empty list of token ids per row.
      pad_id: the id written into padding slots.
      length: T; default the longest prompt. Round it up yourself (e.g. to a power of
        two) to reuse one compilation across prompt lengths.

    Raises:
      RuntimeShapeError: no prompts, an empty prompt, or a prompt longer than ``length``.

    Example:
      >>> tokens, mask = pad_prompts([[5, 6, 7], [8]], pad_id=0)
      >>> tokens.tolist(), mask.tolist()
      ([[5, 6, 7], [0, 0, 8]], [[True, True, True], [False, False, True]])
    """
    prompts = [list(p) for p in prompts]
    if not prompts:
        raise RuntimeShapeError("prompts: expected at least one prompt, got none")
    empty = [i for i, p in enumerate(prompts) if not p]
    if empty:
        raise RuntimeShapeError(
            f"prompts: expected at least one token per prompt, got an empty prompt at row {empty[0]}"
        )
    longest = max(len(p) for p in prompts)
    length = longest if length is None else int(length)
    if longest > length:
        raise RuntimeShapeError(f"length: expected >= the longest prompt ({longest}), got {length}")
    tokens = np.full((len(prompts), length), pad_id, np.int32)
    mask = np.zeros((len(prompts), length), bool)
    for i, p in enumerate(prompts):
        tokens[i, length - len(p) :] = p
        mask[i, length - len(p) :] = True
    return tokens, mask


def _check_rng(rng) -> None:
    dtype = getattr(rng, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        if rng.shape == ():
            return
    elif dtype == jnp.uint32 and tuple(rng.shape) == (2,):
        return
    raise RuntimeDtypeError(
        f"rng: expected a single PRNG key (jax.random.key(seed)), got "
        f"{dtype}{list(getattr(rng, 'shape', ()))}"
    )


def _check_inputs(prompt_tokens, prompt_mask, tables, constraint_ids, sampler, max_new_tokens):
    if not isinstance(tables, ConstraintTables):
        raise RuntimeShapeError(f"tables: expected ConstraintTables, got {type(tables).__name__}")
    if not hasattr(prompt_tokens, "dtype"):
        prompt_tokens = np.asarray(prompt_tokens)
    if not (jnp.issubdtype(prompt_tokens.dtype, jnp.integer) and prompt_tokens.dtype != bool):
        raise RuntimeDtypeError(
            f"prompt_tokens: expected an integer array, got dtype {prompt_tokens.dtype}"
        )
    if prompt_tokens.ndim != 2 or prompt_tokens.shape[1] < 1:
        raise RuntimeShapeError(
            f"prompt_tokens: expected shape [B, T] with T >= 1, got {list(prompt_tokens.shape)}"
        )
    b, t = prompt_tokens.shape
    if prompt_mask is None:
        prompt_mask = np.ones((b, t), bool)
    if not hasattr(prompt_mask, "dtype"):
        prompt_mask = np.asarray(prompt_mask)
    if prompt_mask.dtype != bool:
        raise RuntimeDtypeError(f"prompt_mask: expected dtype bool, got {prompt_mask.dtype}")
    if tuple(prompt_mask.shape) != (b, t):
        raise RuntimeShapeError(
            f"prompt_mask: expected shape {[b, t]} (the prompt's), got {list(prompt_mask.shape)}"
        )
    if is_concrete(prompt_mask):
        last = np.asarray(prompt_mask)[:, -1]
        if not last.all():
            raise RuntimeShapeError(
                "prompt_mask: expected left-padded prompts (the last slot of every row real), "
                f"got a pad in the last slot of row {int(np.flatnonzero(~last)[0])}; use pad_prompts"
            )
    ids = check_constraint_ids(tables, constraint_ids)
    if ids.shape[0] != b:
        raise RuntimeShapeError(
            f"constraint_ids: expected one id per prompt row ({b}), got {ids.shape[0]}"
        )
    if not callable(sampler):
        raise RuntimeShapeError(f"sampler: expected a Sampler, got {type(sampler).__name__}")
    try:
        hash(sampler)
    except TypeError as e:
        raise RuntimeShapeError(
            f"sampler: expected a hashable sampler (a frozen dataclass), got {sampler!r}"
        ) from e
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral):
        if not (hasattr(max_new_tokens, "shape") and max_new_tokens.shape == ()):
            raise RuntimeShapeError(f"max_new_tokens: expected an int >= 1, got {max_new_tokens!r}")
        if not is_concrete(max_new_tokens):
            raise RuntimeShapeError(
                "max_new_tokens: expected a concrete int (it sizes the output buffer), got a "
                "traced value; pass it as a Python int"
            )
    n = int(max_new_tokens)
    if n < 1:
        raise RuntimeShapeError(f"max_new_tokens: expected an int >= 1, got {n}")
    return jnp.asarray(prompt_tokens, jnp.int32), jnp.asarray(prompt_mask), ids, n


def _cache_slots(cache) -> int | None:
    """A cache pytree's slots (static), or None where it has no ``valid`` [B, S]."""
    shape = getattr(getattr(cache, "valid", None), "shape", None)
    return shape[1] if shape is not None and len(shape) == 2 else None


def _lead_width(tables, fast_forward, healing, canonical) -> int:
    """F where `generate` feeds each row's start forced run in the prefill, else 0: with
    fast-forward (the loops that feed forced runs), without healing (its first token comes
    before any run) and canonical mode (which holds a run's last token back)."""
    if not fast_forward or healing is not None or canonical is not None:
        return 0
    return _fast_forward.chunk_width(tables) - 1


def _check_cache_length(cache, needed: int) -> None:
    slots = _cache_slots(cache)
    if slots is not None and slots < needed:
        raise RuntimeShapeError(
            f"cache: expected room for at least {needed} slots (prompt length + max_new_tokens "
            f"- 1), got max_length {slots}"
        )


def generate(
    step_fn: StepFn,
    params: Any,
    prompt_tokens: Int[Array, "B T"],
    tables: ConstraintTables,
    constraint_ids: Int[Array, " B"],
    *,
    sampler: Sampler,
    max_new_tokens: int,
    rng: jax.Array,
    prompt_mask: Bool[Array, "B T"] | None = None,
    cache: Any = None,
    pad_id: int = 0,
    buffer_length: int | None = None,
    data_sharding: jax.sharding.Sharding | None = None,
    fast_forward: bool | _fast_forward.FastForward = False,
    healing: _healing.TokenHealing | None = None,
    speculate: bool | _speculative.Speculate = False,
    draft_keys: Int[Array, "B T"] | None = None,
    canonical: _canonical.CanonicalTables | None = None,
) -> GenerateOutput:
    """Generates up to ``max_new_tokens`` tokens per row under each row's constraint.

    Args:
      step_fn: ``(params, tokens, positions, input_mask, cache) -> (logits, cache)``, e.g.
        ``model.apply_step``. Static: pass the same object each call (not a fresh lambda)
        to reuse the compilation.
      params: the model's parameters (traced).
      prompt_tokens: int[B, T], left-padded prompts (see `pad_prompts`).
      tables: the constraints (`ConstraintTables.from_dfas`).
      constraint_ids: int[B], the constraint of each row; -1 = unconstrained.
      sampler: a `Sampler` (e.g. ``Greedy()``, ``TopP(0.9)``); applied after masking.
      max_new_tokens: the most tokens to generate per row (traced: changing it within
        one buffer bucket does not recompile).
      rng: a PRNG key; step ``i`` samples with ``fold_in(rng, i)``.
      prompt_mask: bool[B, T], False on padding; default all True.
      cache: the model's empty cache (a pytree), or a callable
        ``init_cache(batch_size, max_length)`` (e.g. ``functools.partial(model.init_cache,
        dtype=jnp.bfloat16)``; static, so create it once) called inside the jit with
        ``max_length = T + buffer_length``, or None for a cache-free ``step_fn``.
      pad_id: the id written after each row's end (and fed to the model for finished rows).
      buffer_length: static size of the token buffer; default the next power of two
        >= max(max_new_tokens, 16).
      data_sharding: optional sharding of batch-major arrays (see `generate_sharded`).
      fast_forward: static; feed each row's forced canonical tokens (stored in the
        tables by the compiler) in the same model call as the token sampled before them,
        instead of one call per token (see `automata_jax._fast_forward`). True uses the
        default `FastForward` step policy (which call width each step takes); pass a
        `FastForward` to tune it. Forced tokens
        count as generated tokens. A row whose constraint forces a run at its start
        (``{"name":"``) feeds it with its prompt in the prefill (the prompts grow by the
        tables' longest run F, each row's run right-aligned; without healing or
        ``canonical``, and where a passed cache has the F slots), so its first call
        after the prefill already chooses. Needs a cache with an ``end_index`` (or none); an
        ``init_cache`` callable gets ``buffer_length`` extra slots (rows chunk at different
        times, leaving padding slots); a cache pytree needs ``max_new_tokens`` slots past
        the prompt, and steps are chunked only while it has room for them.
      healing: optional token healing at the prompt boundary (`heal_prompts` backs off the
        prompts' last tokens and returns it): each healing row's first token must start
        with its backed-off bytes (see `automata_jax._healing`); the output then starts
        with them. DFA constraints only; needs ``max_new_tokens >= 2``.
      speculate: static; verify drafts copied from each row's prompt and output (an
        n-gram lookup) in the same model call, keep the longest prefix the row would
        have chosen anyway and rewind the cache and state to it (see
        `automata_jax._speculative`; exact for every sampler, greedy outputs identical).
        True uses the default `Speculate` policy; combines with ``fast_forward``. Needs
        a cache with ``valid`` and ``end_index`` (or none) and room as fast-forward does.
      draft_keys: optional int[B, T] with ``speculate``: each prompt slot's alternate
        spelling for the draft lookup (-1: none), e.g. the token without its leading
        space as a JSON string spells a document's word (`automata_jax.draft_keys`,
        built on the host with the prompts); or int[B, T, 1 + R], that key then the
        slot's bare spelling in up to R tokens (`automata_jax.bare_spellings`). Changes
        which drafts are proposed, never the outputs.
      canonical: optional `CanonicalTables` (`canonical_tables(canonical_bpe(path))`):
        canonical-only decoding. A token is allowed iff the text stays a prefix of the
        row's language AND the generated token sequence stays the tokenizer's own
        encoding of its text (the BPE pair test, see `automata_jax._canonical`; the first
        token is tested alone). Where the constraint allows no canonical token the row
        samples under the constraint alone for that step, counted in
        ``canonical_fallbacks``. With `Greedy` and `Temperature` only the sampled token is
        tested, and the full mask is computed on steps where some row's token fails (exact;
        `automata_jax._canonical.canonical_sample`). With ``fast_forward`` a forced run is
        fed only up to its first token that may not follow the one before it (the row
        samples there instead; see `automata_jax._fast_forward.ff_loop`). Not combined
        with ``speculate``.

    Returns:
      A `GenerateOutput`.

    Raises:
      RuntimeShapeError, RuntimeDtypeError, UnknownConstraintError: bad inputs, before
        anything runs (the logits width is checked while tracing ``step_fn``).

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np
      >>> from automata_compile import TokenDFA
      >>> # Tokens: 0 = "a", 1 = EOS. Language: "aa".
      >>> dfa = TokenDFA(token_class=np.array([1, 0], np.int32),
      ...                next_state=np.array([[-1, 1], [-1, 2], [-1, -1]], np.int32),
      ...                accepting=np.array([False, False, True]), start=0, eos_ids=(1,),
      ...                vocab_fingerprint="toy")
      >>> tables = ConstraintTables.from_dfas(dfa, vocab_size=2)
      >>> def step_fn(params, tokens, positions, input_mask, cache):
      ...     return jnp.zeros(tokens.shape + (2,)), cache  # a model that has no opinion
      >>> from automata_jax import Greedy
      >>> out = generate(step_fn, None, jnp.zeros((1, 1), jnp.int32), tables, [0],
      ...                sampler=Greedy(), max_new_tokens=5, rng=jax.random.key(0), pad_id=7)
      >>> out.tokens.tolist(), out.lengths.tolist(), out.accepted.tolist()
      ([[0, 0, 1, 7, 7]], [2], [True])
    """
    prompt_tokens, prompt_mask, ids, n = _check_inputs(
        prompt_tokens, prompt_mask, tables, constraint_ids, sampler, max_new_tokens
    )
    _check_rng(rng)
    if not isinstance(pad_id, numbers.Integral):
        raise RuntimeDtypeError(f"pad_id: expected an int, got {pad_id!r}")
    capacity = bucket(n, MIN_BUFFER) if buffer_length is None else int(buffer_length)
    if capacity < n:
        raise RuntimeShapeError(f"buffer_length: expected >= max_new_tokens ({n}), got {capacity}")
    fast_forward = _fast_forward.policy(fast_forward, tables)  # None: off
    _fast_forward.accepts_logits_at(step_fn)  # an undeclared forwarder fails before tracing
    if healing is not None:
        _healing.check(healing, tables, prompt_tokens.shape[0])
        if n < 2:
            raise RuntimeShapeError(f"max_new_tokens: expected >= 2 with healing, got {n}")
    speculate = _speculate_policy(speculate, tables, fast_forward)  # None: off
    if draft_keys is not None:
        if speculate is None:
            raise RuntimeShapeError("draft_keys: only used with speculate; pass speculate=True")
        shape = tuple(np.shape(draft_keys))
        if shape[:2] != tuple(prompt_tokens.shape) or len(shape) not in (2, 3):
            raise RuntimeShapeError(
                f"draft_keys: expected the prompts' shape {list(prompt_tokens.shape)} (or "
                f"with a trailing axis of spellings), got "
                f"{list(np.shape(draft_keys))}"
            )
        draft_keys = jnp.asarray(draft_keys, jnp.int32)
    if canonical is not None:
        _canonical.check(canonical, tables.vocab_size)
        if speculate:
            raise RuntimeShapeError("canonical: not combined with speculate")
    slack = _cache_slack(capacity, tables, fast_forward, speculate)
    lead = _lead_width(tables, fast_forward, healing, canonical)
    init_cache = None
    if callable(cache):
        init_cache, cache = cache, None
    else:
        needed = prompt_tokens.shape[1] + n - 1 + min(slack, 1)
        _check_cache_length(cache, needed)
        slots = _cache_slots(cache)
        if cache is not None and (slots is None or slots < needed + lead):
            lead = 0  # no room to feed the start's forced run in the prefill: a call of its own
        if fast_forward:
            _fast_forward.check_cache(cache)
        if speculate:
            _speculative.check_cache(cache)
    config = LoopConfig(
        step_fn=step_fn,
        sampler=sampler,
        capacity=capacity,
        init_cache=init_cache,
        data_sharding=data_sharding,
        fast_forward=fast_forward,
        speculate=speculate,
        lead=lead,
        backend=jax.default_backend(),
    )
    inputs = LoopInputs(
        params=params,
        prompt_tokens=prompt_tokens,
        prompt_mask=prompt_mask,
        tables=tables,
        constraint_ids=ids,
        max_new_tokens=jnp.asarray(n, jnp.int32),
        rng=rng,
        cache=cache,
        pad_id=jnp.asarray(pad_id, jnp.int32),
        healing=healing,
        draft_keys=draft_keys,
        canonical=canonical,
    )
    out = _generate_jit(config, inputs)
    if capacity != n:
        out = out.replace(tokens=out.tokens[:, :n])
    return out


def _check_step_logits(logits, batch: int, length: int, vocab_size: int) -> None:
    dtype = getattr(logits, "dtype", None)
    if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        raise RuntimeDtypeError(f"step_fn logits: expected a floating-point array, got {dtype}")
    if tuple(logits.shape) != (batch, length, vocab_size):
        raise RuntimeShapeError(
            f"step_fn logits: expected shape [B, T, V] = {[batch, length, vocab_size]} (V = the "
            f"tables' vocab_size), got {list(logits.shape)}; build the tables with "
            "vocab_size = the model's logits width"
        )


@struct.dataclass(kw_only=True)
class DecodeState:
    """The one-token-per-call loop's carried state (after the prefill).

    Attributes:
      step: the next buffer slot to write (traced scalar).
      buffer: int32[B, capacity], the tokens so far (``pad_id`` after a row's end).
      token: int32[B], the last token of each row (fed to the next model call).
      emitted: bool[B], whether ``token`` was emitted (the row was not done).
      state: the rows' `ConstraintState`.
      cache: the model's cache.
      lengths: int32[B], tokens counted so far (EOS and padding are not).
      calls: int32[B], model calls whose logits the row sampled from (the prefill too).
      fallbacks: int32[B], canonical-mode steps sampled under the constraint mask alone.
    """

    step: Int[Array, ""]
    buffer: Int[Array, "B N"]
    token: Int[Array, " B"]
    emitted: Bool[Array, " B"]
    state: ConstraintState
    cache: Any
    lengths: Int[Array, " B"]
    calls: Int[Array, " B"]
    fallbacks: Int[Array, " B"]


def _generate_loop(config: LoopConfig, inputs: LoopInputs) -> GenerateOutput:
    """The whole decode under one jit: prefill, then one of the three loops."""
    step_fn, sampler, capacity = config.step_fn, config.sampler, config.capacity
    fast_forward, speculate, on_batch = config.fast_forward, config.speculate, config.on_batch
    params, prompt_tokens, prompt_mask = inputs.params, inputs.prompt_tokens, inputs.prompt_mask
    tables, rng, cache, pad_id = inputs.tables, inputs.rng, inputs.cache, inputs.pad_id
    max_new_tokens, healing, canonical = inputs.max_new_tokens, inputs.healing, inputs.canonical
    b, t = prompt_tokens.shape
    v = tables.vocab_size
    slack = _cache_slack(capacity, tables, fast_forward, speculate)
    if config.init_cache is not None:
        cache = config.init_cache(b, t + config.lead + capacity + slack)
        if fast_forward:
            _fast_forward.check_cache(cache)
        if speculate:
            _speculative.check_cache(cache)
    num_steps = jnp.clip(max_new_tokens, 1, capacity)
    state = on_batch(init_state(tables, inputs.constraint_ids))
    fed_tokens, fed_mask, lead_tokens, lead_len = prompt_tokens, prompt_mask, None, None
    if config.lead:  # the start's forced run goes in with the prompt (no call of its own)
        lead_tokens, lead_len, state = _fast_forward.lead_run(tables, state, num_steps)
        fed_tokens, fed_mask = _fast_forward.extend_prompt(
            prompt_tokens, prompt_mask, lead_tokens, lead_len, pad_id
        )
    fed = fed_tokens.shape[1]
    positions = jnp.maximum(jnp.cumsum(fed_mask.astype(jnp.int32), axis=1) - 1, 0)
    if _fast_forward.accepts_logits_at(step_fn):  # the prefill's last slot only (left padding)
        last = jnp.full((b,), fed - 1, jnp.int32)
        logits, cache = step_fn(params, fed_tokens, positions, fed_mask, cache, logits_at=last)
        _check_step_logits(logits, b, 1, v)
    else:
        logits, cache = step_fn(params, fed_tokens, positions, fed_mask, cache)
        _check_step_logits(logits, b, fed, v)
    next_position = positions[:, -1] + 1

    def sample(i, last_logits, state, prev=None, has_prev=None):
        last_logits = on_batch(last_logits)
        fallback = jnp.zeros((b,), jnp.int32)
        if canonical is None:
            masked = mask_logits(tables, state, last_logits)
            tokens = sampler(masked, jax.random.fold_in(rng, i))
        else:  # constraint AND canonical; the constraint alone where that leaves nothing
            tokens, fallback = _canonical.canonical_sample(
                canonical, sampler, allowed_mask(tables, state), last_logits,
                jax.random.fold_in(rng, i), prev, has_prev, state.done,
            )  # fmt: skip
        emitted = ~state.done
        tokens = jnp.where(emitted, tokens.astype(jnp.int32), pad_id)
        is_eos = tables.eos_mask[jnp.clip(tokens, 0, v - 1)]
        counted = (emitted & ~is_eos).astype(jnp.int32)
        return tokens, emitted, on_batch(advance(tables, state, tokens)), counted, fallback

    healed = None
    if healing is not None:  # the first token, under the healing mask, fed on its own
        healed, logits, cache, state, next_position = _heal_first(
            step_fn, params, tables, state, logits[:, -1], healing, sampler, rng, pad_id,
            cache, next_position,
        )  # fmt: skip
        num_steps = jnp.clip(max_new_tokens - 1, 1, capacity - 1)
    start = LoopStart(  # where the chunked loops (speculative, fast-forward) start
        params=params,
        tables=tables,
        state=state,
        logits=logits[:, -1],
        cache=cache,
        next_position=next_position,
        num_steps=num_steps,
        rng=rng,
        pad_id=pad_id,
        lead_tokens=lead_tokens,
        lead_len=lead_len,
    )
    if speculate:  # speculative steps (with fast-forward's forced runs when it is on)
        buffer, lengths, state, calls, drafted, kept = _speculative.spec_loop(
            config,
            start,
            prompt_tokens=prompt_tokens,
            prompt_mask=prompt_mask,
            draft_keys=inputs.draft_keys,
        )
        return _output(buffer, lengths, state, calls, healed).replace(
            drafted=drafted, drafts_accepted=kept
        )
    if healed is not None:  # the healed token is the previous one
        prev0, has_prev0 = healed[0], jnp.ones((b,), bool)
    else:
        prev0, has_prev0 = jnp.zeros((b,), jnp.int32), jnp.zeros((b,), bool)
    if fast_forward:
        buffer, lengths, state, calls, fallbacks = _fast_forward.ff_loop(
            config, start, canonical, prev0, has_prev0
        )
        out = _output(buffer, lengths, state, calls, healed)
        return out.replace(canonical_fallbacks=fallbacks)
    token, emitted, state, counted, fallback = sample(0, logits[:, -1], state, prev0, has_prev0)
    buffer = jnp.full((b, capacity), pad_id, jnp.int32).at[:, 0].set(token)
    calls = jnp.ones((b,), jnp.int32)  # the prefill
    carry = DecodeState(
        step=jnp.int32(1),
        buffer=on_batch(buffer),
        token=token,
        emitted=emitted,
        state=state,
        cache=cache,
        lengths=counted,
        calls=calls,
        fallbacks=fallback,
    )

    def cond(c: DecodeState):
        return (c.step < num_steps) & ~jnp.all(c.state.done)

    def body(c: DecodeState) -> DecodeState:
        i = c.step
        position = next_position + (i - 1)
        logits, cache = step_fn(
            params, c.token[:, None], position[:, None], c.emitted[:, None], c.cache
        )
        _check_step_logits(logits, b, 1, v)
        calls = c.calls + (~c.state.done).astype(jnp.int32)  # rows that sample these logits
        token, emitted, state, counted, fallback = sample(
            i, logits[:, 0], c.state, c.token, jnp.ones((b,), bool)
        )
        buffer = jax.lax.dynamic_update_slice(c.buffer, token[:, None], (jnp.int32(0), i))
        return DecodeState(
            step=i + 1,
            buffer=buffer,
            token=token,
            emitted=emitted,
            state=state,
            cache=cache,
            lengths=c.lengths + counted,
            calls=calls,
            fallbacks=c.fallbacks + fallback,
        )

    end = jax.lax.while_loop(cond, body, carry)
    out = _output(end.buffer, end.lengths, end.state, end.calls, healed)
    return out.replace(canonical_fallbacks=end.fallbacks)


def _heal_first(step_fn, params, tables, state, logits, healing, sampler, rng, pad_id, cache, pos):
    """Token healing's first step: sample under the healing mask, feed the token."""
    active = ~state.done
    token, state = _healing.heal_step(
        tables=tables, state=state, logits=logits, healing=healing, sampler=sampler,
        rng=jax.random.fold_in(rng, jnp.iinfo(jnp.int32).max), pad_id=pad_id,
    )  # fmt: skip
    logits, cache = step_fn(params, token[:, None], pos[:, None], active[:, None], cache)
    _check_step_logits(logits, token.shape[0], 1, tables.vocab_size)
    counted = (active & ~tables.eos_mask[jnp.clip(token, 0, tables.vocab_size - 1)]).astype(
        jnp.int32
    )
    return (token, counted, active.astype(jnp.int32)), logits, cache, state, pos + 1


_generate_jit = jax.jit(_generate_loop, static_argnames=("config",))


def cache_length(
    prompt_length: int,
    max_new_tokens: int,
    tables: ConstraintTables,
    *,
    fast_forward=False,
    speculate=False,
    buffer_length: int | None = None,
) -> int:
    """The cache slots `generate` gives a ``cache=`` init function for these sizes: the
    prompt, the start's forced run fed with it (fast-forward), the output buffer and the
    slack of chunked calls (fast-forward, speculation).
    A cache built ahead (e.g. from a shared prompt prefix) with this many slots past its
    prefix fits the same call.

    Example:
      >>> import numpy as np
      >>> from automata_compile import TokenDFA
      >>> dfa = TokenDFA(token_class=np.array([1, 0], np.int32),
      ...                next_state=np.array([[-1, 0]], np.int32),
      ...                accepting=np.array([True]), start=0, eos_ids=(1,),
      ...                vocab_fingerprint="toy")
      >>> tables = ConstraintTables.from_dfas(dfa, vocab_size=4)
      >>> cache_length(64, 20, tables), cache_length(64, 20, tables, speculate=True)
      (96, 128)
    """
    capacity = bucket(max_new_tokens, MIN_BUFFER) if buffer_length is None else buffer_length
    fast_forward = _fast_forward.policy(fast_forward, tables)
    speculate = _speculate_policy(speculate, tables, fast_forward)
    slack = _cache_slack(capacity, tables, fast_forward, speculate)
    lead = _lead_width(tables, fast_forward, None, None)  # the start's run, fed in the prefill
    return int(prompt_length) + lead + capacity + slack


def _speculate_policy(speculate, tables, fast_forward):
    """``speculate`` as the loop runs it (None: off): resolved against fast-forward's
    forced runs, whose width a draft call must also hold."""
    speculate = _speculative.policy(speculate)
    if speculate is None:
        return None
    forced = _fast_forward.chunk_width(tables) - 1 if fast_forward else 0
    return speculate.resolve(forced=forced)


def _cache_slack(capacity, tables, fast_forward, speculate) -> int:
    """Extra cache slots for chunked calls (fast-forward's and speculation's)."""
    if speculate:
        return _speculative.cache_slack(capacity, speculate, fast_forward)
    return _fast_forward.cache_slack(capacity, tables) if fast_forward else 0


def _output(buffer, lengths, state: ConstraintState, calls, healed=None) -> GenerateOutput:
    """The loop's result; a row is accepted when it finished without an error. With
    healing, the healed first token is put in front (the loop wrote at most capacity - 1)."""
    if healed is not None:
        token, counted, call = healed
        buffer = jnp.concatenate([token[:, None], buffer[:, :-1]], axis=1)
        lengths, calls = lengths + counted, calls + call
    return GenerateOutput(
        tokens=buffer,
        lengths=lengths,
        states=state,
        accepted=state.done & ~state.error,
        model_calls=calls,
        drafted=jnp.zeros_like(lengths),
        drafts_accepted=jnp.zeros_like(lengths),
        canonical_fallbacks=jnp.zeros_like(lengths),
    )
