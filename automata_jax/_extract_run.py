"""The model side of the extraction job: load a model and tokenizer, run one batch of prompts.

`load_vocabulary` reads the tokenizer (first, so the schema is compiled and checked
before any model work); `Runner.create` builds the tiny random-weight model (default)
or loads a Gemma-3 checkpoint; `Runner.generate` pads a list of prompts to one fixed batch shape
(prompt length rounded up to a power of two, batch rounded up to the device count,
so a whole job compiles the decode loop once or a few times) and runs
`generate_sharded` over a 1-D ``data`` mesh of every local device.
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

from automata_jax._extract_io import ExtractError
from automata_jax._generate import pad_prompts
from automata_jax._sampling import Greedy, Temperature
from automata_jax._sharding import DATA_AXIS, generate_sharded, replicate
from automata_jax._tables import ConstraintTables, bucket

__all__ = ["RowOutput", "Runner", "load_vocabulary"]

MIN_PROMPT_BUCKET = 32
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
    speculate: bool = False  # drafts copied from the prompt, verified (automata_jax._speculative)

    @classmethod
    def create(cls, args, vocab) -> Runner:
        """From the parsed command line (``--model``, ``--checkpoint``, ...) and the vocabulary
        `load_vocabulary` returned.

        Raises:
          ExtractError, CheckpointError: unreadable weights or config.
        """
        from automata_jax import testing

        on_cpu = jax.default_backend() == "cpu"
        if args.model == "tiny":
            model, params = testing.tiny_model(vocab.size)
            description = (
                f"tiny Gemma-3 architecture, RANDOM weights (seed {testing.DEFAULT_SEED}), "
                f"{model.num_params(params) / 1e6:.1f}M params, tokenizer {vocab.name} "
                f"({vocab.size} ids)"
            )
        else:
            model, params = _load_gemma(args, on_cpu)
            description = (
                f"{args.model} from {args.checkpoint} "
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
            speculate={"on": True, "off": False}.get(
                getattr(args, "speculate", "auto"), not on_cpu
            ),
        )

    def set_constraint(self, dfa) -> None:
        """Puts the compiled schema's tables on the devices (width = the model's logits).

        Raises:
          IncompatibleVocabularyError: the tokenizer has ids the model cannot emit.
        """
        self.tables = ConstraintTables.from_dfas(dfa, vocab_size=self.model.config.vocab_size)

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
        length = bucket(max(len(p) for p in rows), MIN_PROMPT_BUCKET)
        tokens, mask = pad_prompts(rows, pad_id=0, length=length)
        out = generate_sharded(
            self.mesh,
            self.model.apply_step,
            self.params,
            tokens,
            self.tables,
            np.zeros(self.batch_size, np.int32),
            sampler=self.sampler,
            max_new_tokens=self.max_new_tokens,
            rng=jax.random.fold_in(jax.random.key(self.seed), seed_offset),
            prompt_mask=mask,
            cache=self.cache_fn,
            replicate_params=False,
            fast_forward=self.fast_forward,
            speculate=self.speculate,
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


@functools.lru_cache(maxsize=8)
def _cache_fn(model, dtype):
    """One ``init_cache`` callable per (model, dtype): it is a static argument of the jitted
    loop, so reusing the same object lets later jobs in a process reuse the compilation."""
    return functools.partial(model.init_cache, dtype=dtype)


def load_vocabulary(args):
    """The tokenizer: ``--tokenizer``, else the checkpoint's own ``tokenizer.json`` /
    ``tokenizer.model``, else (tiny model) the bundled 32k SentencePiece model
    (`automata_jax.testing.default_tokenizer_path`).

    Raises:
      ExtractError: a missing checkpoint, or one without a tokenizer file.
      VocabularyError: an unreadable tokenizer file.
    """
    from automata_compile import Vocabulary
    from automata_jax import testing

    if args.model == "tiny":
        return Vocabulary.from_file(args.tokenizer or testing.default_tokenizer_path())
    ckpt = Path(args.checkpoint)
    if not ckpt.exists():
        raise ExtractError(f"--checkpoint {str(ckpt)!r} does not exist")
    tokenizer = args.tokenizer
    if tokenizer is None:
        folder = ckpt if ckpt.is_dir() else ckpt.parent
        candidates = [folder / "tokenizer.json", folder / "tokenizer.model"]
        tokenizer = next((c for c in candidates if c.is_file()), None)
        if tokenizer is None:
            raise ExtractError(
                f"no tokenizer.json or tokenizer.model in {str(folder)!r}; pass --tokenizer PATH"
            )
    return Vocabulary.from_file(tokenizer)


def _load_gemma(args, on_cpu: bool):
    from automata_jax.models import Gemma3, Gemma3Config, load_safetensors

    ckpt = Path(args.checkpoint)
    preset = {"gemma3-270m": Gemma3Config.gemma3_270m, "gemma3-1b": Gemma3Config.gemma3_1b}
    config = preset[args.model]()
    hf_config = (ckpt if ckpt.is_dir() else ckpt.parent) / "config.json"
    if hf_config.is_file():  # trust the checkpoint's own numbers (e.g. its sliding window)
        try:
            config = Gemma3Config.from_hf_config(json.loads(hf_config.read_text("utf-8")))
        except (OSError, ValueError) as e:
            raise ExtractError(f"cannot read {hf_config}: {e}") from e
    dtype = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}.get(
        args.dtype, jnp.float32 if on_cpu else jnp.bfloat16
    )
    model = Gemma3(config)
    return model, load_safetensors(ckpt, config, dtype=dtype)
