"""Preparation steps of the extraction job: the schema, its cached compiled tables, the prompts.

* `load_schema` reads a JSON Schema file with errors that name the file, line and
  column, or the JSON pointer where ``jsonschema``'s meta-schema check fails.
* `compile_schema_cached` compiles the schema for a vocabulary, or loads the
  artifact a previous run saved (`automata_compile.pipeline._cache`: keyed by the
  schema, the options, the vocabulary and the compiler's source; `TokenDFA.save` files,
  no pickle, with the compile's warnings beside them, replayed on each load).
* `PromptTemplate` fills ``{text}``, ``{schema}``, ``{fields}`` and ``{id}`` into a template
  and encodes it; special-token names written in the *template* (``<start_of_turn>``)
  become their ids, while the same names inside a document stay plain text.
* `schema_fields` describes a schema by its property names and types only (``name
  (string), age (integer)``): no title, description or bounds for a model to copy into values.
* `chat_prompt` renders a model's chat template (Jinja, from a GGUF's metadata) around a
  user message, as a template source.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

from automata_compile import InvalidSchemaError, TokenDFA
from automata_jax._errors import ExtractError

__all__ = [
    "PromptTemplate",
    "chat_prompt",
    "compile_schema_cached",
    "first_error",
    "load_schema",
    "schema_fields",
    "schema_validator",
]

_PLACEHOLDERS = ("{text}", "{schema}", "{fields}", "{id}")


def load_schema(path: str | os.PathLike) -> dict[str, Any] | bool:
    """Reads a JSON Schema file.

    Raises:
      ExtractError: the file is missing or not JSON (with line and column).
      InvalidSchemaError: not a schema (not an object or boolean, or rejected by the
        ``jsonschema`` meta-schema check).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise ExtractError(f"schema file {str(path)!r} does not exist") from e
    except (OSError, UnicodeDecodeError) as e:
        raise ExtractError(f"cannot read schema file {str(path)!r}: {e}") from e
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidSchemaError(
            f"schema file {str(path)!r}, line {e.lineno}, column {e.colno}: not valid JSON ({e.msg})"
        ) from e
    if not isinstance(schema, dict | bool):
        raise InvalidSchemaError(
            f"schema file {str(path)!r}: a JSON Schema is an object or a boolean, "
            f"got {type(schema).__name__}",
            pointer="",
        )
    _check_against_metaschema(schema, path)
    return schema


def _check_against_metaschema(schema: dict[str, Any] | bool, path: Path) -> None:
    cls = _validator_class(schema)
    error = first_error(cls(cls.META_SCHEMA), schema)
    if error is not None:
        pointer, message = error
        raise InvalidSchemaError(
            f"schema file {str(path)!r}: invalid JSON Schema at {pointer}: {message}",
            pointer=pointer,
        )


def _validator_class(schema):
    import jsonschema  # a dependency of the package; imported here, by the job only
    from jsonschema.validators import validator_for

    return validator_for(schema, default=jsonschema.Draft202012Validator)


def schema_validator(schema: dict[str, Any] | bool):
    """A ``jsonschema`` validator for instances of ``schema`` (its ``$schema`` draft, else
    2020-12)."""
    return _validator_class(schema)(schema)


def first_error(validator, instance) -> tuple[str, str] | None:
    """``(JSON pointer, message)`` of the most relevant validation error, or None if valid."""
    import jsonschema

    error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    if error is None:
        return None
    return "/" + "/".join(str(p) for p in error.absolute_path), error.message


def compile_schema_cached(
    schema: dict[str, Any] | bool,
    vocab,
    cache_dir: str | os.PathLike | None,
    *,
    name: str = "schema",
    timeout_s: float | None = None,
    progress: bool | None = None,
    **options: Any,
) -> tuple[TokenDFA, Path | None, bool]:
    """Compiles ``schema`` for ``vocab``, reusing an artifact from ``cache_dir`` if present
    (`automata_compile.pipeline._cache`: the key hashes the schema, the options, the
    vocabulary and the compiler; a load replays the compile's warnings).

    Args:
      schema: the JSON Schema.
      vocab: the `automata_compile.Vocabulary` of the model.
      cache_dir: where artifacts live (created if needed); None disables the cache.
      name: a readable prefix for the artifact file name.
      timeout_s: compile wall-clock limit (`CompileTimeoutError` past it); not in the key.
      progress: show a spinner on stderr while a compile runs past a second (None: only
        when stderr is a terminal); see `automata_compile.progress`.
      **options: passed to `automata_compile.compile_json_schema` and hashed into the key.

    Returns:
      ``(dfa, artifact_path, hit)``: ``hit`` is True when the tables were loaded.

    Raises:
      The compiler's errors (`UnsupportedSchemaError`, `InvalidSchemaError`, ...).
    """
    import automata_compile

    def build() -> TokenDFA:
        # Lenient mode warns about each keyword it drops; the job prints them (`plain_warnings`).
        with automata_compile.progress(f"compiling the schema {name}", enabled=progress):
            return automata_compile.compile_json_schema(
                schema, vocab, timeout_s=timeout_s, **options
            )

    if cache_dir is None:
        return build(), None, False
    spec = {"schema": schema, "options": options, "max_states": None}
    return automata_compile.cached_tables(
        cache_dir, kind="json_schema", spec=spec, vocab=vocab, build=build, stem=name
    )


@dataclasses.dataclass(frozen=True)
class PromptTemplate:
    """A prompt template: text with ``{text}``, ``{schema}`` and ``{id}`` placeholders.

    Attributes:
      source: the template text.
      name: where it came from (for messages).
    """

    source: str
    name: str = "template"

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> PromptTemplate:
        """Reads a template file; it must contain ``{text}``.

        Raises:
          ExtractError: missing/unreadable file, or no ``{text}`` placeholder.
        """
        path = Path(path)
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ExtractError(f"cannot read prompt template {str(path)!r}: {e}") from e
        if "{text}" not in source:
            raise ExtractError(
                f"prompt template {str(path)!r} has no {{text}} placeholder "
                "(where each record's text goes); {schema}, {fields} and {id} are optional"
            )
        return cls(source, path.name)

    def encode(
        self, vocab, *, text: str, schema_json: str, record_id: Any, fields: str = ""
    ) -> list[int]:
        """The prompt's token ids: BOS (if the vocabulary has one), then the filled template.

        Special-token names (``vocab.special_tokens``) are recognized in the template
        only; placeholders are filled before encoding so tokens can span them.
        """
        values = {
            "{text}": text,
            "{schema}": schema_json,
            "{fields}": fields,
            "{id}": str(record_id),
        }
        ids: list[int] = [] if vocab.bos_id is None else [vocab.bos_id]
        for part in self._parts(vocab):
            if isinstance(part, int):
                if not (ids and part == vocab.bos_id and ids == [part]):
                    ids.append(part)
                continue
            filled = re.sub(
                "|".join(re.escape(p) for p in _PLACEHOLDERS), lambda m: values[m.group(0)], part
            )
            if filled:
                ids.extend(vocab.encode(filled))
        return ids

    def prefix_ids(self, vocab) -> list[int]:
        """The ids every prompt of this template starts with: `encode` of the template up to
        its last line break before the first placeholder (BOS included); empty when no line
        break precedes it. A tokenizer could merge tokens across that line break, so a caller
        reusing the prefix checks that each prompt starts with these ids."""
        firsts = [self.source.find(p) for p in _PLACEHOLDERS if p in self.source]
        cut = self.source.rfind("\n", 0, min(firsts, default=len(self.source))) + 1
        if cut <= 0:
            return []
        head = PromptTemplate(self.source[:cut], self.name)
        return head.encode(vocab, text="", schema_json="", record_id="")

    def _parts(self, vocab) -> list[str | int]:
        names = sorted(
            (n for n in vocab.special_tokens if n and n in self.source), key=len, reverse=True
        )
        if not names:
            return [self.source]
        pieces = re.split("(" + "|".join(re.escape(n) for n in names) + ")", self.source)
        return [vocab.special_tokens[p] if p in vocab.special_tokens else p for p in pieces if p]


def schema_fields(schema: Any) -> str:
    """The top-level properties of an object schema as ``name (type), ...`` (``"the JSON
    value"`` for any other schema): what a prompt can show without the annotations (title,
    description, bounds) that a small model copies into values."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict) or not props:
        return "the JSON value"
    parts = []
    for name, sub in props.items():
        kind = sub.get("type") if isinstance(sub, dict) else None
        if isinstance(kind, list):
            kind = " or ".join(map(str, kind))
        parts.append(f"{name} ({kind})" if isinstance(kind, str) else name)
    return ", ".join(parts)


def chat_prompt(chat_template: str, user_message: str, *, bos_token: str = "") -> str:
    """Renders a Hugging Face / GGUF chat template (Jinja) for one user turn followed by the
    generation prompt; placeholders such as ``{text}`` in ``user_message`` survive, so the
    result is a `PromptTemplate` source.

    Raises:
      ExtractError: the template does not render (naming the cause).
      ImportError: ``jinja2`` is not installed.
    """
    try:
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the model's chat template needs 'jinja2': pip install 'automata-jax[demo]' "
            "(or pass --prompt-template FILE)"
        ) from e

    def raise_exception(message):
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(chat_template).render(
            messages=[{"role": "user", "content": user_message}],
            add_generation_prompt=True,
            bos_token=bos_token,
            eos_token="",
        )
    except TemplateError as e:
        raise ExtractError(f"the model's chat template does not render: {e}") from e
