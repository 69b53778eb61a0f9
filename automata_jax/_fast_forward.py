"""Fast-forward decoding: the sampled token plus the forced canonical tokens in one model call.

The compiler stores, per DFA state, the tokens every continuation must start with
(`automata_compile.tokens._forced`). This loop emits them without sampling: each
iteration, for every active row,

* if its state has a forced run, the row emits that run (no sampling);
* else it samples a token ``x`` (masked as usual) and, if the state after ``x`` has a
  forced run, emits ``x`` followed by the run;

and the emitted tokens of all rows are fed to the model in one call (a chunk of
``w`` slots, the unused ones masked out), inside the same ``lax.while_loop``.
The width ``w`` of each iteration's call is chosen on the device, among a few static
widths (`FastForward.widths`, at most ``W = 1 + F``), by a ``lax.switch``: the width
whose saved model calls best pay for its extra cost (`FastForward`'s cost model), so
a single-token call is taken unless enough rows gain, and a chunk is only as wide as
the runs need. A row whose run is longer than ``w`` feeds its first ``w`` tokens and
the rest next iteration. After a chunked call the cache's ``end_index`` advances by the
longest row's count, not by w, so padding slots are overwritten by the next call (the cache
must be a pytree with an ``end_index``, as `automata_jax.models.gemma3.KVCache`, or
None). Rows chunk at different times, so the slots used can exceed the tokens of any
row: `generate` allocates ``capacity`` extra slots (`cache_slack`), and an iteration
whose chunk would leave too few slots to finish every row with single steps feeds one
token per row instead (so a cache never overflows; ``--max-new-tokens`` is honoured).
The logits used next are those of each row's last fed token; a ``step_fn`` that
accepts a ``logits_at`` keyword (int32[B]) computes only those (saves the output layer
on the forced slots), otherwise they are gathered from the full ``[B, W, V]`` logits. A step
declares the keyword with a ``takes_logits_at = True`` attribute (`accepts_logits_at`; a plain
function's signature is the fallback).

**The lead.** A row whose constraint forces a run at its start (``{"name":"`` for an object
whose first property is required) would feed it in a call of its own right after the prefill,
whose logits it does not need. `generate` appends it to the row's prompt instead
(`lead_run`, `extend_prompt`: the prompts grow by the static F, each row's run right-aligned,
so the batch stays left-padded), and the loop starts after it: one call fewer per such row,
the same tokens (the model sees the same sequence at the same positions).

Forced tokens are allowed from the state they are fed in by construction (checked when
the artifact is built and loaded), so outputs stay in the language; they count as
generated tokens (``max_new_tokens`` caps the total, cutting a run short if needed).
"""

# ruff: noqa: F722 (jaxtyping shape strings such as "B V" are not Python expressions)

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jaxtyping import Array, Int

from automata_jax import _bitset, _canonical
from automata_jax._constraint import ConstraintState, advance, allowed_mask, mask_logits
from automata_jax._errors import RuntimeShapeError
from automata_jax._loop import (
    LoopConfig,
    LoopStart,
    cache_room,
    defers_cache_write,
    switch_calls,
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FastForward:
    """Fast-forward's step policy: which call width each loop iteration takes (static, hashable).

    Every iteration, each active row has ``k >= 1`` tokens it could feed (its sampled
    token plus the forced run after it, or a state's forced run). A call of width ``w``
    feeds ``min(k, w)`` of them per row and costs about ``1 + slot_cost * (w - 1)``
    single-token calls, while it saves ``gain(w) = sum(min(k, w) - 1)`` row calls over
    the active rows. With ``n`` active rows in lock step, ``n`` saved row calls save
    about one batch call, so the loop takes the width with the largest
    ``gain(w) - n * slot_cost * (w - 1)`` (ties: the narrower), and a single-token call
    when no width scores above 0. One forced row among many free-text rows then does
    not widen the whole batch's call (unless its gain outweighs the batch's extra
    cost); a batch where every row is forced chunks.

    Attributes:
      widths: the call widths to choose from (1 is always added; widths above
        ``W = 1 + F`` are cut to W). Each width compiles its own model call (on a loaded
        2-core CPU, the tiny job model's loop compiled in 22 s without fast-forward, 24 s
        with widths (1, 5), 32 s with (1, 3, 5) and 42 s with (1, 2, 3, 5)). Default
        (None): 1, ``1 + F // 2`` and W, e.g. (1, 3, 5) for F = 4.
      slot_cost: the extra cost of one more slot in a call, as a fraction of a
        single-token call. The default 0.05 is what a slot costs the bench model of
        ``benchmarks/decode_bench.py`` on a 2-core CPU at batch 8 (a 5-slot call costs
        about 1.2 single calls); with it, at batch 8 one row's saved call pays for a
        2-slot call, while at batch 64 a slot needs 3.2 saved calls. 0 chunks whenever
        any row gains (the policy before this class: ``widths=(W,), slot_cost=0``, one
        chunk width taken when any row has forced tokens). Raise it where wide calls
        cost more (large batches on CPU); on an accelerator, where a decode call is
        bound by reading the weights, extra slots are nearly free.

    Example:
      >>> FastForward(widths=(1, 3), slot_cost=0.1).resolve(full_width=5)
      FastForward(widths=(1, 3), slot_cost=0.1)
    """

    widths: tuple[int, ...] | None = None
    slot_cost: float = 0.05

    def __post_init__(self):
        if self.widths is not None:
            widths = tuple(int(w) for w in self.widths)
            if not widths or min(widths) < 1:
                raise RuntimeShapeError(
                    f"FastForward.widths: expected widths >= 1, got {self.widths!r}"
                )
            object.__setattr__(self, "widths", widths)
        cost = float(self.slot_cost)
        if not (cost >= 0 and np.isfinite(cost)):
            raise RuntimeShapeError(
                f"FastForward.slot_cost: expected a finite number >= 0, got {self.slot_cost!r}"
            )
        object.__setattr__(self, "slot_cost", cost)

    def resolve(self, *, full_width: int) -> FastForward:
        """This policy with concrete, sorted widths for chunks of at most ``full_width`` slots."""
        if self.widths is None:
            wanted = [1 + max((full_width - 1) // 2, 1), full_width]
        else:
            wanted = [min(w, full_width) for w in self.widths]
        widths = sorted({1, *wanted})
        return dataclasses.replace(self, widths=tuple(widths))


def policy(fast_forward, tables) -> FastForward | None:
    """`generate`'s ``fast_forward`` argument as a resolved `FastForward`, or None (off).

    Raises:
      RuntimeShapeError: ``fast_forward`` is neither a bool nor a `FastForward`.
    """
    if isinstance(fast_forward, FastForward):
        chosen = fast_forward
    elif isinstance(fast_forward, bool | np.bool_):
        chosen = FastForward() if fast_forward else None
    else:
        raise RuntimeShapeError(
            f"fast_forward: expected a bool or a FastForward, got {fast_forward!r}"
        )
    if chosen is None or chunk_width(tables) == 1:
        return None  # tables that force nothing: the plain loop
    return chosen.resolve(full_width=chunk_width(tables))


LOGITS_AT = "takes_logits_at"
"""The attribute a step function declares its ``logits_at`` keyword with (see `accepts_logits_at`)."""


def accepts_logits_at(step_fn) -> bool:
    """Whether the loops may pass ``step_fn`` a ``logits_at`` keyword (see the module docstring).

    A declared capability first: ``step_fn.takes_logits_at`` (`LOGITS_AT`; a function's
    attribute, which a bound method reads from its function, or a callable object's class
    attribute), ``True`` or ``False``; for a `functools.partial`, its function's. Only an
    undeclared callable falls back to its signature: a parameter named ``logits_at``.

    Raises:
      RuntimeShapeError: an undeclared ``step_fn`` whose signature takes ``**kwargs``
        (a forwarder: it may or may not pass ``logits_at`` on, and guessing wrong makes
        every call compute the logits at every fed slot, a prefill's whole prompt).
    """
    target = step_fn
    while True:
        declared = getattr(target, LOGITS_AT, None)
        if declared is not None:
            return bool(declared)
        if not isinstance(target, functools.partial):
            break
        target = target.func
    try:
        parameters = inspect.signature(step_fn).parameters
    except (TypeError, ValueError):
        return False
    if "logits_at" in parameters:
        return True
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        raise RuntimeShapeError(
            f"step_fn {step_fn!r} takes **kwargs, so the decode loops cannot tell whether it "
            f"takes a `logits_at` keyword; declare it: set its `{LOGITS_AT}` attribute to True "
            f"(it computes only the logits of slot logits_at[b] per row, shape [B, 1, V]) or False"
        )
    return False


def check_cache(cache) -> None:
    """Fast-forward rewinds ``end_index`` after a chunked call; other caches cannot be used."""
    if cache is not None and not hasattr(cache, "end_index"):
        raise RuntimeShapeError(
            f"cache: fast_forward expected None or a cache pytree with an `end_index` (like "
            f"models.gemma3.KVCache), got {type(cache).__name__}; pass fast_forward=False"
        )


def cache_slack(capacity: int, tables) -> int:
    """Extra cache slots `generate` allocates for fast-forward (see the module docstring)."""
    return max(capacity, chunk_width(tables) - 1)


def chunk_width(tables) -> int:
    """W = 1 + F, the static width of a chunked call (1: the tables force nothing)."""
    if tables.forced_tokens is None:
        return 1
    return 1 + int(tables.forced_tokens.shape[2])


def lead_run(tables, state: ConstraintState, num_steps):
    """Each row's *lead*: the forced run of its constraint's start state (``{"name":"`` for
    a JSON object whose first property is required), known before the first model call, so
    `generate` feeds it with the prompt in the prefill (`extend_prompt`) instead of in a
    call of its own after it. Cut to ``num_steps`` (``max_new_tokens``).

    Returns:
      (tokens int32[B, F], count int32[B] (0: none), the state after the run).
    """
    num_k, num_q, _ = tables.padded_shape
    k = jnp.clip(state.constraint, 0, num_k - 1)
    q = jnp.clip(state.state, 0, num_q - 1)
    live = (state.constraint >= 0) & ~state.done
    n = jnp.minimum(jnp.where(live, tables.forced_len[k, q], 0), num_steps)
    after = _state_after(tables.forced_states[k, q], n, state.state)
    bits = _bitset.run_bits(tables.bitset, state.state, n, state.bits, state.constraint)
    return tables.forced_tokens[k, q], n, state.replace(state=after, bits=bits)


def extend_prompt(prompt_tokens, prompt_mask, run, n, pad_id):
    """The prompts with each row's first ``n`` tokens of ``run`` ([B, F]) appended, still
    left-padded: ``[B, T + F]`` (row i's prompt moves ``F - n[i]`` slots left).

    Returns:
      (tokens int32[B, T + F], mask bool[B, T + F]).
    """
    b, t = prompt_tokens.shape
    f = run.shape[1]
    tokens = jnp.concatenate([prompt_tokens, run], axis=1)
    mask = jnp.concatenate([prompt_mask, jnp.arange(f)[None, :] < n[:, None]], axis=1)
    source = jnp.arange(t + f, dtype=jnp.int32)[None, :] - (f - n)[:, None]
    inside = source >= 0
    source = jnp.clip(source, 0, t + f - 1)
    tokens = jnp.where(inside, jnp.take_along_axis(tokens, source, axis=1), pad_id)
    mask = inside & jnp.take_along_axis(mask, source, axis=1)
    return tokens, mask


def ff_loop(config: LoopConfig, start: LoopStart, canonical=None, prev0=None, has_prev0=None):
    """The fast-forward `while_loop`, after the prefill (policy: ``config.fast_forward``).

    With ``canonical`` (`CanonicalTables`; ``prev0``/``has_prev0`` [B]: the token before
    the first, e.g. a healed one) the rows sample as `generate`'s canonical loop does
    (`automata_jax._canonical.canonical_sample`, after the row's last written token), and
    a forced run is fed only up to its first token that may not follow the token before
    it (`canonical_pair_ok`; ``"`` then a forced ``,`` where ``",`` is one token), and
    never its last token: the text after a run is free, and the tokenizer may merge the
    run's last token with it (``"`` then ``a`` as `` "a``). The row samples there instead,
    under the canonical mask, so it may take a token across the run's boundary. Every
    adjacent pair of the output passes the pair test (outside counted fallbacks); a run
    of one token saves no call.

    Returns:
      (buffer int32[B, capacity], lengths int32[B], state, model_calls int32[B],
      canonical_fallbacks int32[B]); model calls count the prefill.
    """
    policy: FastForward = config.fast_forward
    step_fn, sampler, capacity = config.step_fn, config.sampler, config.capacity
    on_batch = config.on_batch
    params, tables, state, logits = start.params, start.tables, start.state, start.logits
    cache, next_position, num_steps = start.cache, start.next_position, start.num_steps
    rng, pad_id = start.rng, start.pad_id
    b = state.state.shape[0]
    v = tables.vocab_size
    valid = getattr(cache, "valid", None)
    cache_length = getattr(cache, "max_length", None)
    if cache_length is None and getattr(valid, "ndim", 0) == 2:
        cache_length = valid.shape[1]
    w = chunk_width(tables)
    widths = policy.widths
    width_array = jnp.asarray(widths, jnp.int32)  # [nW], ascending, widths[0] == 1
    num_k, num_q, _ = tables.padded_shape
    slots = jnp.arange(w, dtype=jnp.int32)
    rows = jnp.arange(b)
    with_logits_at = accepts_logits_at(step_fn)
    deferred = defers_cache_write(step_fn, cache, config.backend) and len(widths) > 1
    deferring = {} if not deferred else dict(write_cache=False)  # see `switch_calls`

    def run_of(st, q):
        """(forced tokens [B, F], length [B], states after each [B, F]) of state q per row."""
        k = jnp.clip(st.constraint, 0, num_k - 1)
        qc = jnp.clip(q, 0, num_q - 1)
        n = jnp.where(st.constraint >= 0, tables.forced_len[k, qc], 0)
        return tables.forced_tokens[k, qc], n, tables.forced_states[k, qc]

    def canonical_prefix(prev, has_prev, run):
        """int32[B]: how many leading tokens of ``run`` [B, F] pass the pair test, each
        after the one before it (the first after ``prev``)."""
        f = run.shape[1]
        before = jnp.concatenate([prev[:, None], run[:, :-1]], axis=1)
        first = jnp.broadcast_to(slots[None, :f] == 0, run.shape)
        ok = _canonical.canonical_pair_ok(
            canonical, before.reshape(-1), (has_prev[:, None] | ~first).reshape(-1),
            run.reshape(-1),
        ).reshape(run.shape)  # fmt: skip
        return jnp.min(jnp.where(ok, f, slots[None, :f]), axis=1)

    def emit(i, last_logits, st, written, room, buffer):
        """One iteration's tokens per row.

        Returns ([B, W] tokens, count [B], new state, non-EOS count [B], feed [B], the
        index of the chosen width). ``room``: cache slots left; a width is only chosen
        when its chunk leaves enough slots to finish every row with single steps (see
        the module docstring).
        """
        active = ~st.done & (written < num_steps)
        budget = num_steps - written
        # Rows whose state forces text emit it without sampling.
        pre_tok, pre_n, pre_states = run_of(st, st.state)
        if canonical is not None:  # the token before, and the run cut at its first bad pair
            last = buffer[rows, jnp.clip(written - 1, 0, capacity - 1)]
            prev = jnp.where(written > 0, last, prev0)
            has_prev = (written > 0) | has_prev0
            held = jnp.maximum(pre_n - 1, 0)  # the run's last token is sampled (see ff_loop)
            pre_n = jnp.minimum(held, canonical_prefix(prev, has_prev, pre_tok))
        pre = active & (pre_n > 0)
        sampling = active & ~pre
        # The others sample, then append the forced run of the state they land in.
        key = jax.random.fold_in(rng, i)
        if canonical is None:
            x = sampler(mask_logits(tables, st, on_batch(last_logits)), key)
            fallback = jnp.zeros((b,), jnp.int32)
        else:
            x, fallback = _canonical.canonical_sample(
                canonical, sampler, allowed_mask(tables, st), on_batch(last_logits), key,
                prev, has_prev, ~sampling,
            )  # fmt: skip
        x = jnp.where(sampling, x.astype(jnp.int32), pad_id)
        moved = jax.tree.map(
            lambda new, old: jnp.where(_rows(sampling, new), new, old), advance(tables, st, x), st
        )
        post_tok, post_n, post_states = run_of(moved, moved.state)
        if canonical is not None:
            held = jnp.maximum(post_n - 1, 0)
            post_n = jnp.minimum(held, canonical_prefix(x, jnp.ones((b,), bool), post_tok))
        post_n = jnp.where(sampling & ~moved.done, post_n, 0)
        post_n = jnp.minimum(post_n, jnp.maximum(budget - 1, 0))
        pre_n = jnp.minimum(pre_n, budget)
        want = jnp.where(pre, pre_n, jnp.where(active, 1 + post_n, 0))
        choice, count = _choose_width(want, active, budget, room, width_array, policy.slot_cost)
        pre_n = jnp.where(pre, count, 0)
        post_n = jnp.where(sampling, count - 1, 0)

        shifted = jnp.concatenate([x[:, None], post_tok], axis=1)  # [B, W]
        padded_pre = jnp.concatenate([pre_tok, jnp.full((b, 1), pad_id, jnp.int32)], axis=1)
        tokens = jnp.where(pre[:, None], padded_pre, shifted)
        tokens = jnp.where(slots[None, :] < count[:, None], tokens, pad_id)

        q_pre = _state_after(pre_states, pre_n, st.state)
        q_post = _state_after(post_states, post_n, moved.state)
        new_state = jnp.where(pre, q_pre, jnp.where(active, q_post, st.state))
        if tables.bitset is not None:  # a run may set a key's bit (`_bitset.run_bits`)
            cid = st.constraint
            b_pre = _bitset.run_bits(tables.bitset, st.state, pre_n, st.bits, cid)
            b_post = _bitset.run_bits(tables.bitset, moved.state, post_n, moved.bits, cid)
            moved = moved.replace(bits=jnp.where(pre[:, None], b_pre, b_post))
        st = moved.replace(state=new_state)
        is_eos = tables.eos_mask[jnp.clip(x, 0, v - 1)] & sampling
        counted = count - is_eos.astype(jnp.int32)
        # Rows that will sample again feed their tokens; finished or cut-off rows do not.
        feed = jnp.where(~st.done & (written + count < num_steps), count, 0)
        return tokens, count, on_batch(st), counted, feed, choice, fallback

    def write(buffer, written, tokens, count):
        at = jnp.arange(tokens.shape[1], dtype=jnp.int32)[None, :]
        idx = jnp.where(at < count[:, None], written[:, None] + at, capacity)  # dropped
        return buffer.at[rows[:, None], idx].set(tokens, mode="drop")

    def call(tokens, count, positions, cache, choice):
        """Feeds each row's ``count`` tokens in a call of width ``widths[choice]``; returns
        the logits after each row's last token."""
        last = jnp.maximum(count - 1, 0)

        def single(cache):
            out, cache = step_fn(
                params, tokens[:, :1], positions[:, None], (count > 0)[:, None], cache, **deferring
            )
            return out[:, 0].astype(jnp.float32), cache

        def chunked(width):
            def run(cache):
                start = None if cache is None else cache.end_index
                pos = positions[:, None] + slots[None, :width]
                mask = slots[None, :width] < count[:, None]
                if with_logits_at:
                    out, cache = step_fn(
                        params, tokens[:, :width], pos, mask, cache, logits_at=last, **deferring
                    )
                    out = out[:, 0]
                else:
                    out, cache = step_fn(params, tokens[:, :width], pos, mask, cache, **deferring)
                    out = jnp.take_along_axis(out, last[:, None, None], axis=1)[:, 0]
                if cache is not None:
                    cache = cache.replace(end_index=start + jnp.max(count))
                return out.astype(jnp.float32), cache

            return run

        branches = [single] + [chunked(width) for width in widths[1:]]
        return switch_calls(choice, branches, widths, cache, deferred)

    def room_of(cache):
        return cache_room(cache, cache_length)

    buffer = on_batch(jnp.full((b, capacity), pad_id, jnp.int32))
    written = jnp.zeros((b,), jnp.int32)
    if start.lead_tokens is not None:  # the start's forced run, fed with the prompt
        buffer = write(buffer, written, start.lead_tokens, start.lead_len)
        written = start.lead_len
    if canonical is not None and prev0 is None:
        prev0, has_prev0 = jnp.zeros((b,), jnp.int32), jnp.zeros((b,), bool)
    tokens, count, state, counted, feed, choice, fallback = emit(
        0, logits, state, written, room_of(cache), buffer
    )
    buffer = write(buffer, written, tokens, count)
    carry = FastForwardState(
        step=jnp.int32(1),
        buffer=buffer,
        written=written + count,
        lengths=written + counted,  # the lead's tokens count (none is EOS)
        tokens=tokens,
        feed=feed,
        choice=choice,
        state=state,
        cache=cache,
        position=next_position,
        calls=jnp.ones((b,), jnp.int32),
        fallbacks=fallback,
    )

    def cond(c: FastForwardState):
        return jnp.any(~c.state.done & (c.written < num_steps))

    def body(c: FastForwardState) -> FastForwardState:
        logits, cache = call(c.tokens, c.feed, c.position, c.cache, c.choice)
        tokens, count, state, counted, feed, choice, fallback = emit(
            c.step, logits, c.state, c.written, room_of(cache), c.buffer
        )
        return FastForwardState(
            step=c.step + 1,
            buffer=write(c.buffer, c.written, tokens, count),
            written=c.written + count,
            lengths=c.lengths + counted,
            tokens=tokens,
            feed=feed,
            choice=choice,
            state=state,
            cache=cache,
            position=c.position + c.feed,
            calls=c.calls + (c.feed > 0).astype(jnp.int32),
            fallbacks=c.fallbacks + fallback,
        )

    end = jax.lax.while_loop(cond, body, carry)
    return end.buffer, end.lengths, end.state, end.calls, end.fallbacks


@struct.dataclass(kw_only=True)
class FastForwardState:
    """The fast-forward loop's carried state.

    Attributes:
      step: the iteration (traced scalar; step ``i`` samples with ``fold_in(rng, i)``).
      buffer: int32[B, capacity], the tokens so far.
      written: int32[B], buffer slots written per row.
      lengths: int32[B], tokens counted so far (EOS and padding are not).
      tokens: int32[B, W], the last iteration's tokens, fed by the next call.
      feed: int32[B], how many of ``tokens`` the next call feeds (0: none).
      choice: the index of the next call's width in ``FastForward.widths`` (traced).
      state: the rows' `ConstraintState`.
      cache: the model's cache.
      position: int32[B], the position of each row's next fed token.
      calls: int32[B], model calls whose logits the row used (the prefill too).
      fallbacks: int32[B], canonical-mode samples under the constraint mask alone (the
        fast-forward loop's; None in the speculative loop).
    """

    step: Int[Array, ""]
    buffer: Int[Array, "B N"]
    written: Int[Array, " B"]
    lengths: Int[Array, " B"]
    tokens: Int[Array, "B W"]
    feed: Int[Array, " B"]
    choice: Int[Array, ""]
    state: ConstraintState
    cache: Any
    position: Int[Array, " B"]
    calls: Int[Array, " B"]
    fallbacks: Int[Array, " B"] | None = None


def _choose_width(want, active, budget, room, width_array, slot_cost: float):
    """The call width of one iteration: what each row could feed (``want`` [B]), cut to
    each width; the best net gain wins (the first best: the narrowest). A width is only
    chosen when its chunk leaves enough cache slots (``room``) to finish every row with
    single steps. Returns (the width's index, each row's token count [B])."""
    cut = jnp.minimum(want[None, :], width_array[:, None])  # [nW, B]
    gain = jnp.sum(jnp.maximum(cut - 1, 0), axis=1).astype(jnp.float32)
    n_active = jnp.sum(active).astype(jnp.float32)
    score = gain - n_active * slot_cost * (width_array - 1).astype(jnp.float32)
    left = jnp.max(jnp.where(active[None, :], budget[None, :] - cut, 0), axis=1)
    fits = (jnp.max(cut, axis=1) + left <= room) & (width_array <= room)  # W slots written
    score = jnp.where(fits & (gain > 0), score, -jnp.inf).at[0].set(0.0)
    choice = jnp.argmax(score).astype(jnp.int32)
    return choice, cut[choice]


def _state_after(states, n, base):
    """The state after each row's ``n``-th forced token (``base`` where ``n`` is 0)."""
    after = jnp.take_along_axis(states, jnp.maximum(n - 1, 0)[:, None], axis=1)[:, 0]
    return jnp.where(n > 0, after, base)


def _rows(cond: jax.Array, x: jax.Array) -> jax.Array:
    """``cond`` (one bool per row, shape [B]) shaped to broadcast against ``x`` ([B, ...])."""
    return cond.reshape(cond.shape + (1,) * (x.ndim - cond.ndim))
