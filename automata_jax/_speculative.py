"""Speculative decoding under the constraint: drafts verified in the loop, state rewound.

A speculative step generalizes fast-forward's (`automata_jax._fast_forward`): each loop
iteration, every active row feeds one model call with

* its **head**: the token chosen for it (``x``) then the forced run of the state after
  ``x`` (fast-forward), or the forced run of its state, which needs no choice; then
* its **draft**: up to ``K`` tokens from an n-gram lookup in its own prompt and output
  (`automata_jax._draft`), taken after the head; with fast-forward and
  `Speculate.exit_drafts`, a copy that *stops* (its first token copied from a clause-start
  slot, see `_draft.STOP`, or its first token the constraint rejects) goes on instead with
  the state's exit token (`ConstraintTables.exit_tokens`) and the forced run after it, so
  one draft can finish a value and reach the next choice (up to ``D = K + 1 + F`` tokens).

Before the call, the constraint state is advanced over the draft on the device and the
draft is cut at its first token that leaves the language (or is EOS), so a draft never
feeds the model a token the constraint forbids. The call returns logits at up to ``J =
1 + K`` slots: those of the draft prefixes ``head + draft[:j]`` (j = 0..d) whose state
does not force a run, in order (a forced token needs no logits). After each prefix ``j``
the row's token is *chosen* exactly as the loop without drafts would choose it after the
same prefix: the first forced token where that state forces a run (with fast-forward),
else a sample from its logits masked by that state. Drafts are accepted
while the chosen token equals the draft; the first chosen token that differs (or the
one after the last draft) is the row's ``x`` for the next iteration. The KV cache's
slots of rejected drafts are marked invalid and its ``end_index`` set to the longest
kept prefix (later calls overwrite the rest), positions advance by the kept tokens, and
the constraint state is the one after the accepted prefix.

**Exactness.** Every emitted token is the choice the plain (or fast-forward) loop would
make after the same prefix: greedy outputs are identical (up to the float differences
between a wide and a narrow call of the same model, which fast-forward has too), and
under any sampler each token is a sample from the masked model distribution given the
prefix. With a deterministic (point-mass) draft ``d`` this is the standard speculative
acceptance rule: ``d`` is kept with probability ``p(d)``; otherwise the emitted token is
a sample from ``p`` conditioned on not being ``d``. So speculation is exact for sampling
too; only the random stream differs (slot ``j`` of iteration ``i`` uses
``fold_in(fold_in(rng, i), j)``), so sampled outputs are not the same *draws*.

**The width policy** (`Speculate`), chosen on the device each iteration by a
``lax.switch`` among static branches, as `FastForward` does: fast-forward's widths
(logits at one slot) and the speculative widths (logits at ``J`` slots). A branch's
score is its expected saved row calls, ``sum(min(h, w) - 1) + sum(E[accepted drafts])``
with ``E = a + a^2 + ... + a^k`` for a row's running acceptance rate ``a`` (a prior of
one accepted in two drafted), minus its extra cost ``n_active * (slot_cost * (w - 1) +
logit_cost * (J - 1))``. A batch with nothing to draft scores the speculative branches
at fast-forward's gain minus a larger cost, so it takes fast-forward's (or the plain)
call, as without speculation.

**Caches.** The cache must be None or a pytree with ``valid`` (bool[B, S]) and
``end_index`` whose model reads only valid slots (`automata_jax.models.gemma3.KVCache`,
`automata_jax.testing.FakeModel`'s cache). A model with sliding-window attention must
count its window in valid slots, not cache slots, as `automata_jax.models.Gemma3` does;
otherwise slots left invalid by rewinds (and by fast-forward's padding) would shorten it.
"""

# ruff: noqa: F722 (jaxtyping shape strings such as "B V" are not Python expressions)

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jaxtyping import Array, Int

from automata_jax import _bitset, _draft
from automata_jax._constraint import advance, mask_logits
from automata_jax._errors import RuntimeShapeError
from automata_jax._fast_forward import FastForward, FastForwardState, accepts_logits_at, chunk_width
from automata_jax._loop import (
    LoopConfig,
    LoopStart,
    cache_room,
    defers_cache_write,
    switch_calls,
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Speculate:
    """Speculative decoding's drafts and width policy (static, hashable).

    Attributes:
      draft_len: K, the most drafted tokens verified per row per call.
      ngram_sizes: the n-gram lengths looked up, longest first.
      widths: the call widths of the speculative branches (each compiles its own model
        call). Default (None): ``1 + K``, and also ``1 + F + K`` with fast-forward (F:
        the tables' longest forced run), so a forced run and a full draft fit one call.
      slot_cost: the extra cost of one more slot in a call, as a fraction of a single
        token call (as `FastForward.slot_cost`).
      logit_cost: the extra cost of logits at one more slot (the output layer; for
        Gemma-3 270M's 262k vocabulary it is most of a decode step's arithmetic).
      logit_slots: the logit slots of the speculative branches: each width in ``widths``
        compiles one call per count here (capped at ``min(width, 1 + K)``). Default (None):
        ``1 + K`` only. Fewer slots make a call cheaper where its drafts need fewer choices
        (forced tokens need none); the policy cuts each row's draft to the slots a branch
        has. Each extra branch compiles one more model call.
      call_costs: measured costs, ``((width, logit slots, cost), ...)``: a call's time as a
        multiple of the one-token call on the device at hand (`benchmarks/speculative_costs.py`
        times them). When given, every branch (fast-forward's too) costs ``cost - 1`` in
        the policy instead of the linear ``slot_cost``/``logit_cost`` model: a branch not in
        the table takes the cheapest measured call at least as wide with at least as many
        logit slots, or the linear model where none is.
      prior_accepted, prior_drafted: the acceptance rate's prior, as pseudo-counts: a
        row's rate is ``(accepted + prior_accepted) / (drafted + prior_drafted)``.
      exit_drafts: with fast-forward, a copy that stops (a new clause in the prompt, or a
        token the constraint rejects) goes on with the state's exit token and the forced
        run after it (`ConstraintTables.exit_tokens`), so a draft can end a value and
        reach the next choice; up to ``K + 1 + F`` drafted tokens, of which at most K + 1
        need logits (forced ones are verified without).
      lone_exits: with ``exit_drafts``, a row whose chosen token is not followed by a
        forced run (it is inside a value: ``programmer``, ``3``) and whose lookup copies
        nothing drafts the exit alone, with its run: a value the document does not spell
        (a paraphrase, a case change) often ends after the token the model chose.
      structure_copies: for constrained rows, also copy after a head that ends with a forced
        run (``,"occupation``) and after a one-token n-gram found only in the row's own
        output (the previous value's ``":"``), and draft a lone exit after a chosen token
        the row already wrote. Off by default: such a context is the constraint's
        structure (a value just opened), the copy is the previous value (or the prompt's
        schema), the exit an empty value, and the model rejects them at their first
        token: a wider call for nothing.
      structure_drafts: with fast-forward, a draft (or an empty one) that ends in a state
        with a *structural draft* (`ConstraintTables.structure_drafts`: forced text with no
        forced run, ``":"`` after a key, whose spelling is the model's choice) goes on with
        that token: one more draft slot, verified like the rest. On by default (held-out
        extraction 1.05x and BFCL 1.05x the records per CPU-second of the loop without it,
        BENCHMARKS.md); tables without them (-1, bitset tables) draft nothing more.

    Example:
      >>> Speculate(draft_len=3).resolve(forced=0)
      Speculate(draft_len=3, ngram_sizes=(3, 2, 1), widths=(4,), slot_cost=0.05, logit_cost=0.1, logit_slots=None, call_costs=None, prior_accepted=1.0, prior_drafted=2.0, exit_drafts=True, lone_exits=True, structure_copies=False, structure_drafts=True)
    """

    draft_len: int = 4
    ngram_sizes: tuple[int, ...] = (3, 2, 1)
    widths: tuple[int, ...] | None = None
    slot_cost: float = 0.05
    logit_cost: float = 0.1
    logit_slots: tuple[int, ...] | None = None
    call_costs: tuple[tuple[int, int, float], ...] | None = None
    prior_accepted: float = 1.0
    prior_drafted: float = 2.0
    exit_drafts: bool = True
    lone_exits: bool = True
    structure_copies: bool = False
    structure_drafts: bool = True

    def __post_init__(self):
        k = self.draft_len
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise RuntimeShapeError(f"Speculate.draft_len: expected an int >= 1, got {k!r}")
        object.__setattr__(self, "draft_len", int(k))
        for name in ("exit_drafts", "lone_exits", "structure_copies", "structure_drafts"):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise RuntimeShapeError(
                    f"Speculate.{name}: expected a bool, got {getattr(self, name)!r}"
                )
            object.__setattr__(self, name, bool(getattr(self, name)))
        sizes = tuple(int(n) for n in self.ngram_sizes)
        if not sizes or min(sizes) < 1:
            raise RuntimeShapeError(
                f"Speculate.ngram_sizes: expected sizes >= 1, got {self.ngram_sizes!r}"
            )
        object.__setattr__(self, "ngram_sizes", tuple(sorted(set(sizes), reverse=True)))
        if self.widths is not None:
            widths = tuple(sorted({int(w) for w in self.widths}))
            if not widths or widths[0] < 2:
                raise RuntimeShapeError(
                    f"Speculate.widths: expected widths >= 2 (a head and a draft), got "
                    f"{self.widths!r}"
                )
            object.__setattr__(self, "widths", widths)
        if self.logit_slots is not None:
            counts = tuple(sorted({int(j) for j in self.logit_slots}))
            if not counts or counts[0] < 2:
                raise RuntimeShapeError(
                    f"Speculate.logit_slots: expected counts >= 2 (a draft and the choice after "
                    f"it), got {self.logit_slots!r}"
                )
            object.__setattr__(self, "logit_slots", counts)
        if self.call_costs is not None:
            table = []
            for entry in self.call_costs:
                try:
                    w, j, c = entry
                    w, j, c = int(w), int(j), float(c)
                except (TypeError, ValueError):
                    w = j = c = None
                if w is None or w < 1 or j < 1 or j > w or not (c > 0 and np.isfinite(c)):
                    raise RuntimeShapeError(
                        "Speculate.call_costs: expected (width, logit slots, cost) entries "
                        f"with 1 <= logit slots <= width and a finite cost > 0, got {entry!r}"
                    )
                table.append((w, j, c))
            object.__setattr__(self, "call_costs", tuple(sorted(table)))
        for name in ("slot_cost", "logit_cost", "prior_accepted", "prior_drafted"):
            value = float(getattr(self, name))
            if not (value >= 0 and np.isfinite(value)):
                raise RuntimeShapeError(
                    f"Speculate.{name}: expected a finite number >= 0, got {getattr(self, name)!r}"
                )
            object.__setattr__(self, name, value)
        if self.prior_drafted <= self.prior_accepted:
            raise RuntimeShapeError(
                "Speculate.prior_drafted: expected more than prior_accepted (a rate below 1), "
                f"got {self.prior_drafted} <= {self.prior_accepted}"
            )

    def resolve(self, *, forced: int) -> Speculate:
        """This policy with concrete widths, for tables whose runs are up to ``forced`` long
        (0: no fast-forward)."""
        if self.widths is not None:
            return self
        k = self.draft_len
        widths = {1 + k} | ({1 + forced + k} if forced else set())
        return dataclasses.replace(self, widths=tuple(sorted(widths)))


def extra_cost(spec: Speculate, ff: FastForward | None, width: int, n_logits: int) -> float:
    """A branch's extra cost over a one-token call, as a fraction of one (the policy's unit):
    measured (`Speculate.call_costs`) or the linear models."""
    if spec.call_costs is not None:
        fits = [c for w, j, c in spec.call_costs if w >= width and j >= n_logits]
        if fits:
            one = [c for w, j, c in spec.call_costs if w == 1 and j == 1]
            return max(min(fits) / (one[0] if one else 1.0) - 1.0, 0.0)
    if n_logits == 1:
        return (ff.slot_cost if ff is not None else 0.0) * (width - 1)
    return spec.slot_cost * (width - 1) + spec.logit_cost * (n_logits - 1)


def policy(speculate) -> Speculate | None:
    """`generate`'s ``speculate`` argument as a `Speculate`, or None (off).

    Raises:
      RuntimeShapeError: ``speculate`` is neither a bool nor a `Speculate`.
    """
    if isinstance(speculate, Speculate):
        return speculate
    if isinstance(speculate, bool | np.bool_):
        return Speculate() if speculate else None
    raise RuntimeShapeError(f"speculate: expected a bool or a Speculate, got {speculate!r}")


def check_cache(cache) -> None:
    """Rewinding needs a cache with per-slot ``valid`` bits and an ``end_index`` (or none)."""
    if cache is None:
        return
    valid = getattr(cache, "valid", None)
    if not hasattr(cache, "end_index") or getattr(valid, "ndim", 0) != 2:
        raise RuntimeShapeError(
            f"cache: speculate expected None or a cache pytree with `valid` (bool[B, S]) and "
            f"`end_index` (like models.gemma3.KVCache), got {type(cache).__name__}; pass "
            "speculate=False"
        )


def branches(spec: Speculate, ff: FastForward | None) -> tuple[tuple[int, int], ...]:
    """The static (width, logit slots) of each call branch: fast-forward's (or the single
    call), then the speculative ones."""
    plain = ff.widths if ff is not None else (1,)
    j = 1 + spec.draft_len
    counts = (j,) if spec.logit_slots is None else spec.logit_slots
    spec_calls = sorted({(w, min(w, j, n)) for w in spec.widths for n in counts})
    return tuple((w, 1) for w in plain) + tuple((w, n) for w, n in spec_calls if n > 1)


def max_width(spec: Speculate, ff: FastForward | None) -> int:
    return max(w for w, _ in branches(spec, ff))


def cache_slack(capacity: int, spec: Speculate, ff: FastForward | None) -> int:
    """Extra cache slots `generate` allocates (as `_fast_forward.cache_slack`)."""
    return max(capacity, max_width(spec, ff) - 1)


def rewind(cache, start, keep, width: int):
    """The cache with each row's slots ``[start + keep, start + width)`` invalid and
    ``end_index = start + max(keep)`` (the rest is overwritten by the next call)."""
    if cache is None:
        return None
    slots = jnp.arange(cache.valid.shape[1], dtype=jnp.int32)[None, :]
    drop = (slots >= start + keep[:, None]) & (slots < start + width)
    return cache.replace(valid=cache.valid & ~drop, end_index=start + jnp.max(keep))


def spec_loop(config: LoopConfig, start: LoopStart, *, prompt_tokens, prompt_mask, draft_keys=None):
    """The speculative `while_loop`, after the prefill (see the module docstring).

    Returns:
      (buffer int32[B, capacity], lengths int32[B], state, model_calls int32[B],
      drafted int32[B], accepted int32[B]); model calls count the prefill; drafted counts
      the draft tokens fed to the model, accepted those kept.
    """
    spec: Speculate = config.speculate
    ff: FastForward | None = config.fast_forward
    step_fn, sampler, capacity = config.step_fn, config.sampler, config.capacity
    on_batch = config.on_batch
    params, tables, state, logits = start.params, start.tables, start.state, start.logits
    cache, next_position, num_steps = start.cache, start.next_position, start.num_steps
    rng, pad_id = start.rng, start.pad_id
    b, t = prompt_tokens.shape
    v = tables.vocab_size
    k_max = spec.draft_len
    j_max = 1 + k_max  # logit slots per call
    calls_of = branches(spec, ff)
    width_array = jnp.asarray([w for w, _ in calls_of], jnp.int32)
    logit_array = jnp.asarray([j for _, j in calls_of], jnp.int32)
    cost_array = jnp.asarray([extra_cost(spec, ff, w, j) for w, j in calls_of], jnp.float32)
    w_max = max_width(spec, ff)
    use_ff = ff is not None and tables.forced_tokens is not None
    f = chunk_width(tables) - 1 if use_ff else 0
    use_exits = use_ff and spec.exit_drafts and tables.exit_tokens is not None
    use_struct = use_ff and spec.structure_drafts and tables.structure_drafts is not None
    # draft slots: a copy, an exit, its run, a structural draft
    d_max = k_max + (1 + f if use_exits else 0) + (1 if use_struct else 0)
    num_k, num_q, _ = tables.padded_shape
    slots = jnp.arange(w_max, dtype=jnp.int32)
    rows = jnp.arange(b)
    with_logits_at = accepts_logits_at(step_fn)
    deferred = defers_cache_write(step_fn, cache, config.backend) and len(calls_of) > 1
    deferring = {} if not deferred else dict(write_cache=False)  # see `switch_calls`
    valid = getattr(cache, "valid", None)
    cache_length = None if valid is None else valid.shape[1]

    keys = spellings = None  # the prompt's alternate spellings; the output has none
    if draft_keys is not None:
        if draft_keys.ndim == 3:  # the twin, then the bare spelling (`_draft.draft_keys`)
            spelled = draft_keys[:, :, 1:]
            spellings = jnp.where((spelled >= 0) & (spelled < v), spelled, -1)
            spellings = jnp.concatenate(
                [spellings, jnp.full((b, capacity, spelled.shape[2]), -1, jnp.int32)], axis=1
            )
            draft_keys = draft_keys[:, :, 0]
        keys = jnp.concatenate([draft_keys, jnp.full((b, capacity), -1, jnp.int32)], axis=1)

    unigrams_before = None  # constrained rows: no one-token match in their own output
    if not spec.structure_copies:
        unigrams_before = jnp.where(state.constraint >= 0, t, t + capacity).astype(jnp.int32)

    def run_of(st):
        """(forced tokens [B, F], length [B], states after each [B, F]) of each row's state."""
        if not use_ff:
            zeros = jnp.zeros((b, 1), jnp.int32)
            return zeros, jnp.zeros((b,), jnp.int32), zeros
        k = jnp.clip(st.constraint, 0, num_k - 1)
        q = jnp.clip(st.state, 0, num_q - 1)
        n = jnp.where((st.constraint >= 0) & ~st.done, tables.forced_len[k, q], 0)
        return tables.forced_tokens[k, q], n, tables.forced_states[k, q]

    def forces(st):
        """Whether each state (any shape) forces a run: its next token needs no logits."""
        if not use_ff:
            return jnp.zeros(st.state.shape, bool)
        k = jnp.clip(st.constraint, 0, num_k - 1)
        q = jnp.clip(st.state, 0, num_q - 1)
        return (st.constraint >= 0) & ~st.done & (tables.forced_len[k, q] > 0)

    def first_forced(st):
        """The first token of each state's forced run (any shape; meaningful where `forces`)."""
        if not use_ff:
            return jnp.zeros(st.state.shape, jnp.int32)
        k = jnp.clip(st.constraint, 0, num_k - 1)
        q = jnp.clip(st.state, 0, num_q - 1)
        return tables.forced_tokens[k, q, 0]

    def choose(key, st, row_logits):
        """The token the loop without drafts would emit next: the forced one, or a sample."""
        x = sampler(mask_logits(tables, st, row_logits), key).astype(jnp.int32)
        run, n, _ = run_of(st)
        return jnp.where(n > 0, run[:, 0], x)

    def select(tree, idx):
        """Per row b, ``leaf[idx[b], b]`` of a pytree of [J, B, ...] leaves."""
        return jax.tree.map(lambda leaf: leaf[idx, rows], tree)

    def walk(st, tokens, count):
        """States after ``tokens[:, :j]`` for j = 0..D (rows stop at ``count``): [D+1, B].

        On an accelerator (`LoopConfig.branch_free`), unrolled over the static D: on XLA:GPU
        each trip of a loop reads its predicate back to the host and launches its own
        kernels; unrolled, XLA fuses the steps. On the CPU, a `lax.scan` (a trip costs
        little there, and one traced step compiles much faster than D for a pushdown
        automaton's stack)."""
        if not config.branch_free:

            def one(s, j):
                moved = advance(tables, s, tokens[:, j])
                s = jax.tree.map(
                    lambda new, old: jnp.where(_rows(j < count, new), new, old), moved, s
                )
                return s, s

            _, after = jax.lax.scan(one, st, jnp.arange(tokens.shape[1]))
            return jax.tree.map(lambda s0, rest: jnp.concatenate([s0[None], rest]), st, after)
        states = [st]
        for j in range(tokens.shape[1]):
            moved = advance(tables, states[-1], tokens[:, j])
            states.append(
                jax.tree.map(
                    lambda new, old, j=j: jnp.where(_rows(j < count, new), new, old),
                    moved,
                    states[-1],
                )
            )
        return jax.tree.map(lambda *leaves: jnp.stack(leaves), *states)

    def upto(states, n, length):
        """``walk(st, tokens, n)`` from ``states = walk(st, tokens, count)`` for ``n <=
        count`` (int32[B]): state ``min(j, n)`` at each j < ``length`` ([length, B])."""
        idx = jnp.minimum(jnp.arange(length, dtype=jnp.int32)[:, None], n[None, :])
        return jax.tree.map(lambda leaf: leaf[idx, rows[None, :]], states)

    def in_language(st, drafts, k):
        """The draft cut at its first token that leaves the language (or is EOS): (drafts,
        count [B], the states walked over the uncut draft, [D+1, B])."""
        states = walk(st, drafts, k)
        ok = ~states.done[1:] & ~states.error[1:]  # [D, B]
        k = jnp.minimum(k, jnp.sum(jnp.cumprod(ok.astype(jnp.int32), axis=0), axis=0))
        return drafts, k, states

    def add_structure(drafts, k, at, room):
        """The draft ``drafts[:, :k]`` (ending in state ``at``) and, where ``at`` has a
        structural draft (`ConstraintTables.structure_drafts`) and no forced run, that
        token after it, within ``room`` slots. Returns (drafts int32[B, D], count [B],
        where one was added [B], the state after it [B])."""
        kk = jnp.clip(at.constraint, 0, num_k - 1)
        token = tables.structure_drafts[kk, jnp.clip(at.state, 0, num_q - 1)]
        moved = advance(tables, at, jnp.maximum(token, 0))
        ok = (at.constraint >= 0) & ~at.done & ~at.error & (token >= 0) & ~forces(at)
        ok = ok & ~moved.done & ~moved.error & (k < jnp.minimum(room, d_max))
        width = drafts.shape[1]
        if width < d_max:
            drafts = jnp.concatenate([drafts, jnp.zeros((b, d_max - width), jnp.int32)], axis=1)
        pos = jnp.arange(d_max, dtype=jnp.int32)[None, :]
        drafts = jnp.where(ok[:, None] & (pos == k[:, None]), token[:, None], drafts)
        return drafts, k + ok.astype(jnp.int32), ok, moved

    def end_the_copy(st, drafts, k_cut, k_lang, stop, room, lone, walked):
        """The draft after a copy that stops: where the lookup's copy starts a new clause
        (``stop``) or has a token the constraint rejects (``k_lang < k_cut``), it goes on
        with the state's exit token (`ConstraintTables.exit_tokens`) and the forced run
        after it, up to ``room`` tokens; then it is cut to the language again. Where
        ``lone`` (bool[B]) and nothing is copied, the draft is that exit and run alone.
        Elsewhere it is the copy (``k_lang`` tokens). ``walked``: the states over the copy
        (``walk(st, drafts, k_cut)``). Returns `in_language`'s (drafts int32[B, D], count
        [B], states [D+1, B])."""
        ends = (stop < k_cut) | (k_lang < k_cut) | (lone & (k_cut == 0))
        copied = jnp.minimum(stop, k_lang)  # < K where the copy ends; <= k_cut
        at = select(walked, copied)  # the state where the copy stops
        kk = jnp.clip(at.constraint, 0, num_k - 1)
        exit_token = tables.exit_tokens[kk, jnp.clip(at.state, 0, num_q - 1)]
        ok = ends & (at.constraint >= 0) & ~at.done & (exit_token >= 0) & ~forces(at)
        run, n, _ = run_of(advance(tables, at, jnp.maximum(exit_token, 0)))
        pos = jnp.arange(d_max, dtype=jnp.int32)[None, :]
        copy = jnp.concatenate([drafts, jnp.zeros((b, d_max - k_max), jnp.int32)], axis=1)
        after = jnp.take_along_axis(run, jnp.clip(pos - copied[:, None] - 1, 0, f - 1), axis=1)
        ended = jnp.where(pos < copied[:, None], copy, after)
        ended = jnp.where(pos == copied[:, None], exit_token[:, None], ended)
        drafts = jnp.where(ok[:, None], ended, copy)
        count = jnp.where(ok, jnp.minimum(copied + 1 + n, jnp.maximum(room, 0)), k_lang)
        return in_language(st, drafts, count)

    def emit(x, st, written, accepted_rate, buffer, room):
        """The next call's tokens per row: the head (written to the buffer now) + a draft.

        Returns (tokens [B, W], head count [B], state after the head, lengths increment
        [B], feed [B] (head + draft, 0 for rows that will not choose again), branch index,
        buffer, written [B], the states after each prefix of the draft where one is fed
        ([D+1, B], from the state after the whole head)).
        """
        active = ~st.done & (written < num_steps)
        budget = num_steps - written
        pre_tok, pre_n, pre_states = run_of(st)
        pre = active & (pre_n > 0)
        sampling = active & ~pre
        x = jnp.where(sampling, x, pad_id)
        moved = jax.tree.map(
            lambda new, old: jnp.where(_rows(sampling, new), new, old), advance(tables, st, x), st
        )
        post_tok, post_n, post_states = run_of(moved)
        post_n = jnp.where(sampling & ~moved.done, post_n, 0)
        post_n = jnp.minimum(post_n, jnp.maximum(budget - 1, 0))
        pre_n = jnp.minimum(pre_n, budget)
        head_n = jnp.where(pre, pre_n, jnp.where(active, 1 + post_n, 0))
        head_tok = jnp.where(
            pre[:, None],
            jnp.concatenate([pre_tok, jnp.full((b, 1), pad_id, jnp.int32)], axis=1),
            jnp.concatenate([x[:, None], post_tok], axis=1),
        )[:, : 1 + f]  # [B, 1 + F]

        def state_after(states, n, base):
            after = jnp.take_along_axis(states, jnp.maximum(n - 1, 0)[:, None], axis=1)[:, 0]
            return jnp.where(n > 0, after, base)

        def head_state(n):
            q_pre = state_after(pre_states, jnp.where(pre, n, 0), st.state)
            q_post = state_after(post_states, jnp.where(sampling, n - 1, 0), moved.state)
            q = jnp.where(pre, q_pre, jnp.where(active, q_post, st.state))
            if tables.bitset is None:
                return moved.replace(state=q)
            cid = st.constraint
            b_pre = _bitset.run_bits(tables.bitset, st.state, jnp.where(pre, n, 0), st.bits, cid)
            b_post = _bitset.run_bits(
                tables.bitset, moved.state, jnp.where(sampling, n - 1, 0), moved.bits, cid
            )
            return moved.replace(state=q, bits=jnp.where(pre[:, None], b_pre, b_post))

        # The draft: looked up after the whole head, cut to the language and the budget.
        head_slots = jnp.arange(1 + f, dtype=jnp.int32)
        idx = written[:, None] + head_slots[None, :]
        idx = jnp.where(head_slots[None, :] < head_n[:, None], idx, capacity)
        looked = buffer.at[rows[:, None], idx].set(head_tok, mode="drop")
        history = jnp.concatenate([prompt_tokens, looked], axis=1)
        known = jnp.arange(capacity, dtype=jnp.int32)[None, :] < (written + head_n)[:, None]
        drafts, k, stop = _draft.prompt_lookup(
            history,
            jnp.concatenate([prompt_mask, known], axis=1),
            t + written + head_n,
            ngram_sizes=spec.ngram_sizes,
            draft_len=k_max,
            keys=keys,
            spellings=spellings,
            unigrams_before=unigrams_before,
        )
        full_head = head_state(head_n)
        looks = active & ~full_head.done
        if not spec.structure_copies:  # a head ending with a forced run: no copy after it
            looks = looks & ~(pre | (sampling & (post_n > 0)))
        k_cut = jnp.where(looks, jnp.minimum(k, budget - head_n), 0)
        drafts, k, walked = in_language(full_head, drafts, k_cut)
        if use_exits:
            # After a chosen token with no forced run (inside a value), an empty copy
            # may still end the value (`Speculate.lone_exits`).
            lone = sampling & (post_n == 0) if spec.lone_exits else jnp.zeros((b,), bool)
            if not spec.structure_copies:  # not after a token the row already wrote (`":"`)
                wrote = jnp.arange(capacity, dtype=jnp.int32)[None, :] < written[:, None]
                lone = lone & ~jnp.any(wrote & (buffer == x[:, None]), axis=1)
            drafts, k, walked = end_the_copy(
                full_head, drafts, k_cut, k, stop, budget - head_n, lone, walked
            )
        # The states after each prefix of the draft (`walk(full_head, drafts, k)`), from
        # the walk already made: [D+1, B].
        walked = upto(walked, k, d_max + 1)
        if use_struct:  # rows whose draft ends where the constraint spells its structure
            at_end = select(walked, k)
            drafts, k_struct, added, moved_on = add_structure(
                drafts, k, at_end, jnp.where(active & ~full_head.done, budget - head_n, 0)
            )
            past = added[None, :] & (jnp.arange(d_max + 1)[:, None] > k[None, :])
            walked = jax.tree.map(
                lambda after, base: jnp.where(_rows(past, base), after[None], base),
                moved_on,
                walked,
            )
            k = k_struct
        need = ~forces(walked)  # [D+1, B]: slot j's choice needs logits
        need_upto = jnp.cumsum(need.astype(jnp.int32), axis=0).T  # [B, D+1]

        # The width: expected saved row calls against the branch's extra cost.
        n_head = jnp.minimum(head_n[None, :], width_array[:, None])  # [nB, B]
        room_left = jnp.maximum(width_array[:, None] - n_head, 0)
        cap = jnp.where(
            (logit_array[:, None] > 1) & (n_head == head_n[None, :]),
            jnp.minimum(k[None, :], room_left),
            0,
        )  # [nB, B]
        lengths = jnp.arange(1, d_max + 1, dtype=jnp.int32)  # a draft of i tokens
        fits_logits = need_upto[None, :, 1:] <= logit_array[:, None, None]  # [nB, B, D]
        kept_len = (lengths[None, None, :] <= cap[:, :, None]) & fits_logits
        n_draft = jnp.sum(kept_len, axis=2).astype(jnp.int32)
        # E[kept] = sum over draft tokens i of a^(choices among the first i): forced tokens
        # in a draft are kept whenever the choices before them are.
        a = accepted_rate[:, None]
        p_kept = a ** need_upto[:, :-1].astype(jnp.float32)  # [B, D]
        expected = jnp.sum(jnp.where(kept_len, p_kept[None], 0.0), axis=2)
        gain = jnp.sum(jnp.maximum(n_head - 1, 0) + expected, axis=1)
        n_active = jnp.sum(active).astype(jnp.float32)
        score = gain - n_active * cost_array
        cut = n_head + n_draft
        left = jnp.max(jnp.where(active[None, :], budget[None, :] - cut, 0), axis=1)
        fits = (jnp.max(cut, axis=1) + left <= room) & (width_array <= room)
        score = jnp.where(fits & (gain > 0), score, -jnp.inf).at[0].set(0.0)
        choice = jnp.argmax(score).astype(jnp.int32)  # the first best: the narrowest
        h = n_head[choice]
        d = n_draft[choice]

        after_head = head_state(h)
        padded_head = jnp.concatenate([head_tok, jnp.full((b, w_max), pad_id, jnp.int32)], 1)
        at_draft = jnp.clip(slots[None, :] - h[:, None], 0, d_max - 1)
        tokens = jnp.where(
            slots[None, :] < h[:, None],
            padded_head[:, :w_max],
            jnp.take_along_axis(drafts, at_draft, axis=1),
        )
        tokens = jnp.where(slots[None, :] < (h + d)[:, None], tokens, pad_id)
        idx = written[:, None] + head_slots[None, :]
        idx = jnp.where(head_slots[None, :] < h[:, None], idx, capacity)
        buffer = buffer.at[rows[:, None], idx].set(head_tok, mode="drop")
        is_eos = tables.eos_mask[jnp.clip(x, 0, v - 1)] & sampling
        counted = h - is_eos.astype(jnp.int32)
        written = written + h
        feed = jnp.where(~after_head.done & (written < num_steps), h + d, 0)
        return tokens, h, on_batch(after_head), counted, feed, choice, buffer, written, walked

    def call(tokens, at, feed, positions, cache, choice):
        """Feeds each row's ``feed`` tokens in branch ``choice``; the logits at slots ``at``
        (int32[B, J]) as float32[B, J, V] and the cache before rewinding."""

        def branch(width, n_logits):
            def run(cache):
                pos = positions[:, None] + slots[None, :width]
                mask = slots[None, :width] < feed[:, None]
                where = jnp.minimum(at[:, :n_logits], width - 1)
                if with_logits_at and n_logits == 1 and width == 1:
                    out, cache = step_fn(params, tokens[:, :1], pos, mask, cache, **deferring)
                elif with_logits_at:
                    slot = where[:, 0] if n_logits == 1 else where
                    out, cache = step_fn(
                        params, tokens[:, :width], pos, mask, cache, logits_at=slot, **deferring
                    )
                else:
                    out, cache = step_fn(params, tokens[:, :width], pos, mask, cache, **deferring)
                    out = jnp.take_along_axis(out, where[:, :, None], axis=1)
                out = out.astype(jnp.float32)
                if n_logits < j_max:  # slots this branch verifies nothing at
                    out = jnp.concatenate([out, jnp.repeat(out[:, -1:], j_max - n_logits, 1)], 1)
                return out, cache

            return run

        fns = [branch(w, j) for w, j in calls_of]
        return switch_calls(choice, fns, [w for w, _ in calls_of], cache, deferred)

    def fed_drafts(st, tokens, head, feed, walked):
        """The fed drafts (int32[B, D], count [B]), the states after each prefix of them
        ([D+1, B]), where those force a run, and the logit slots: ``sel`` (int32[B, J]), the
        draft prefixes whose next token needs logits (the first J; the rest repeat the
        last), and ``rank`` ([D+1, B]), the logit slot of each prefix's choice.

        The states are `emit`'s walk over the draft (``walked``; a row feeds a draft only
        after its whole head, from the state ``walked[0]``), cut to the fed count: no
        second walk."""
        d = jnp.maximum(feed - head, 0)
        at_draft = jnp.clip(head[:, None] + jnp.arange(d_max)[None, :], 0, w_max - 1)
        drafts = jnp.take_along_axis(tokens, at_draft, axis=1)  # [B, D]; valid below d
        states = jax.tree.map(
            lambda cut, now: jnp.where(_rows(d > 0, now), cut, now[None]),
            upto(walked, d, d_max + 1),
            st,
        )  # [D+1, B]: walk(st, drafts, d)
        forced = forces(states)
        prefix = jnp.arange(d_max + 1, dtype=jnp.int32)[:, None]
        need = ~forced & (prefix <= d[None, :])
        first = jnp.sort(jnp.where(need, prefix, d_max + 1), axis=0)[:j_max]  # [J, B]
        sel = jnp.where(first > d_max, d[None, :], first).T
        rank = jnp.clip(jnp.cumsum(need.astype(jnp.int32), axis=0) - 1, 0, j_max - 1)
        return drafts, d, states, forced, sel, rank

    def verify(i, logits, st, drafts, d, states, forced, sel, rank):
        """Chosen tokens after each draft prefix and the accepted draft length per row."""
        key = jax.random.fold_in(rng, i)
        keys = jax.vmap(lambda j: jax.random.fold_in(key, j))(jnp.arange(j_max))

        def every_slot(_):
            at_sel = jax.tree.map(lambda leaf: leaf[sel.T, rows[None, :]], states)  # [J, B]
            by_slot = jax.vmap(choose)(keys, at_sel, jnp.swapaxes(logits, 0, 1))  # [J, B]
            picked = jnp.take_along_axis(by_slot, rank, axis=0)  # [D+1, B]
            return jnp.where(forced, first_forced(states), picked)

        def first_slot(_):  # no row fed a draft: mask and sample one slot, as fast-forward
            return jnp.broadcast_to(choose(keys[0], st, logits[:, 0]), (d_max + 1, b))

        if config.branch_free:  # no predicate read back: every slot, drafts or not
            chosen = every_slot(None)  # [D+1, B] (with no draft: first_slot's, at slot 0)
        else:
            chosen = jax.lax.cond(jnp.any(d > 0), every_slot, first_slot, None)  # [D+1, B]
        same = (chosen[:d_max] == drafts.T) & (jnp.arange(d_max)[:, None] < d[None, :])
        m = jnp.sum(jnp.cumprod(same.astype(jnp.int32), axis=0), axis=0)
        return chosen[m, rows], m, select(states, m)

    def room_of(cache):
        return cache_room(cache, cache_length)

    buffer = on_batch(jnp.full((b, capacity), pad_id, jnp.int32))
    written = jnp.zeros((b,), jnp.int32)
    zeros = jnp.zeros((b,), jnp.int32)
    if start.lead_tokens is not None:  # the start's forced run, fed with the prompt
        lead = jnp.arange(start.lead_tokens.shape[1], dtype=jnp.int32)[None, :]
        idx = jnp.where(lead < start.lead_len[:, None], lead, capacity)
        buffer = buffer.at[rows[:, None], idx].set(start.lead_tokens, mode="drop")
        written = start.lead_len
    rate0 = spec.prior_accepted / spec.prior_drafted
    x = choose(jax.random.fold_in(rng, 0), state, logits)
    rates = jnp.full((b,), rate0, jnp.float32)

    def carry_after(x, state, written, rates, buffer, cache, lengths, **rest) -> SpeculativeState:
        """Emits the chosen tokens and the next drafts; the carry that feeds them next."""
        tokens, head, state, counted, feed, choice, buffer, written, walked = emit(
            x, state, written, rates, buffer, room_of(cache)
        )
        return SpeculativeState(
            tokens=tokens,
            head=head,
            state=state,
            walked=walked,
            feed=feed,
            choice=choice,
            buffer=buffer,
            written=written,
            cache=cache,
            lengths=lengths + counted,
            **rest,
        )

    carry = carry_after(
        x,
        state,
        written,
        rates,
        buffer,
        cache,
        written,  # the lead's tokens count (none is EOS)
        step=jnp.int32(1),
        position=next_position,
        calls=jnp.ones((b,), jnp.int32),
        drafted=zeros,
        accepted=zeros,
    )

    def cond(c: SpeculativeState):
        return jnp.any(~c.state.done & (c.written < num_steps))

    def body(c: SpeculativeState) -> SpeculativeState:
        start = None if c.cache is None else c.cache.end_index
        drafts, d, states, forced, sel, rank = fed_drafts(
            c.state, c.tokens, c.head, c.feed, c.walked
        )
        at = jnp.maximum(c.head - 1, 0)[:, None] + sel
        logits, cache = call(c.tokens, at, c.feed, c.position, c.cache, c.choice)
        x, m, state = verify(c.step, logits, c.state, drafts, d, states, forced, sel, rank)
        fed = c.feed > 0
        state = jax.tree.map(lambda new, old: jnp.where(_rows(fed, new), new, old), state, c.state)
        m = jnp.where(fed, m, 0)
        keep = jnp.where(fed, c.head + m, 0)
        if cache is not None:
            cache = rewind(cache, start, keep, w_max)
        idx = c.written[:, None] + jnp.arange(d_max)[None, :]
        idx = jnp.where(jnp.arange(d_max)[None, :] < m[:, None], idx, capacity)
        buffer = c.buffer.at[rows[:, None], idx].set(drafts, mode="drop")
        written = c.written + m
        drafted = c.drafted + jnp.maximum(c.feed - c.head, 0) * fed
        accepted = c.accepted + m
        rates = (accepted + spec.prior_accepted) / (drafted + spec.prior_drafted)
        return carry_after(
            x,
            on_batch(state),
            written,
            rates.astype(jnp.float32),
            buffer,
            cache,
            c.lengths + m,
            step=c.step + 1,
            position=c.position + keep,
            calls=c.calls + fed.astype(jnp.int32),
            drafted=drafted,
            accepted=accepted,
        )

    end = jax.lax.while_loop(cond, body, carry)
    return end.buffer, end.lengths, end.state, end.calls, end.drafted, end.accepted


@struct.dataclass(kw_only=True)
class SpeculativeState(FastForwardState):
    """The speculative loop's carried state (as `FastForwardState`, plus the draft's).

    Attributes:
      step: the iteration (traced scalar; slot ``j`` of step ``i`` samples with
        ``fold_in(fold_in(rng, i), j)``).
      buffer: int32[B, capacity], the tokens so far.
      written: int32[B], buffer slots written per row.
      lengths: int32[B], tokens counted so far (EOS and padding are not).
      tokens: int32[B, W], the next call's tokens: each row's head, then its draft.
      head: int32[B], how many of ``tokens`` are the head (already written to ``buffer``).
      feed: int32[B], how many of ``tokens`` the next call feeds (head + draft; 0: none).
      choice: the index of the next call's branch in `branches` (traced).
      state: the rows' `ConstraintState` after the head.
      cache: the model's cache.
      position: int32[B], the position of each row's next fed token.
      calls: int32[B], model calls whose logits the row used (the prefill too).
      drafted: int32[B], draft tokens fed to the model.
      accepted: int32[B], draft tokens kept.
      walked: the `ConstraintState` after each prefix of the next call's draft, from the
        state after the whole head ([D+1, B] leaves; where a row feeds a draft, its first
        ``feed - head`` prefixes are those of the fed tokens).
    """

    head: Int[Array, " B"]
    walked: Any
    drafted: Int[Array, " B"]
    accepted: Int[Array, " B"]


def _rows(cond: jax.Array, x: jax.Array) -> jax.Array:
    """``cond`` (one bool per row, shape [B]) shaped to broadcast against ``x`` ([B, ...])."""
    return cond.reshape(cond.shape + (1,) * (x.ndim - cond.ndim))
