"""Command line: ``python -m automata_compile`` (installed as ``automata-compile``).

Compiles a regular expression (``regex PATTERN``), a JSON Schema file
(``json-schema FILE``, ``-`` for stdin) or a Lark grammar (``grammar FILE``, ``-`` for
stdin, or a built-in name: ``json``, ``arithmetic``; ``--start RULE``) for one
tokenizer into a `TokenDFA` tables file (``-o out.npz``), and prints the table sizes
and compile time as one JSON line. ``--tokenizer default`` names the 32k SentencePiece tokenizer bundled with
``automata_jax`` (the one its demo model uses); it is found without importing jax.
Bad input exits with status 2 and the error's message; warnings (``--lenient``
drops keywords) are ``warning: ...`` lines on stderr (`automata_compile._cli`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

from automata_compile._cli import error_line, plain_warnings, progress
from automata_compile._errors import AutomataError, VocabularyError

DEFAULT_TOKENIZER = "default"

_DESCRIPTION = """\
Compile a regular expression, a JSON Schema or a Lark grammar, for one tokenizer's
vocabulary, into a token-level automaton tables file (.npz) that automata_jax loads onto the accelerator.
Prints a JSON line with the table sizes and the compile time."""

_EXAMPLES = """\
examples:
  %(prog)s regex '[0-9]{4}-[0-9]{2}-[0-9]{2}' --tokenizer default -o date.npz
  %(prog)s json-schema person.json --tokenizer gemma-3-1b-it/tokenizer.json -o person.npz
  cat person.json | %(prog)s json-schema - --tokenizer default -o person.npz --lenient
  %(prog)s grammar json --tokenizer default -o json.npz

--tokenizer default is the 32k SentencePiece tokenizer.model.v1 bundled with automata_jax,
the tokenizer of its tiny demo model."""


def default_tokenizer_path() -> Path:
    """The file ``--tokenizer default`` names: ``automata_jax/data/tokenizer.model.v1``.

    The same file as ``automata_jax.testing.default_tokenizer_path()``, found without
    importing automata_jax (so without jax): `find_spec` of a top-level package does not run it.

    Raises:
      VocabularyError: automata_jax is not installed beside the compiler.
    """
    spec = importlib.util.find_spec("automata_jax")
    path = None
    if spec is not None and spec.submodule_search_locations:
        folder = Path(next(iter(spec.submodule_search_locations))).resolve()
        path = folder / "data" / "tokenizer.model.v1"
    if path is None or not path.is_file():
        raise VocabularyError(
            "--tokenizer default is the SentencePiece tokenizer bundled with the automata_jax "
            "package, which is not installed here: install automata-jax, or pass a tokenizer file"
        )
    return path


def _parser() -> argparse.ArgumentParser:
    prog = "automata-compile" if Path(sys.argv[0]).name == "automata-compile" else None
    parser = argparse.ArgumentParser(
        prog=prog or "python -m automata_compile",
        description=_DESCRIPTION,
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="kind", required=True, metavar="{regex,json-schema,grammar}")
    rx = sub.add_parser(
        "regex",
        help="compile a regular expression (Python re syntax, full match)",
        description="Compile a regular expression (Python re syntax, full-match semantics).",
    )
    rx.add_argument("pattern", help="the regular expression")
    js = sub.add_parser(
        "json-schema",
        help="compile a JSON Schema file ('-' reads stdin)",
        description="Compile a JSON Schema (draft 2020-12) file; '-' reads it from stdin.",
    )
    js.add_argument("schema", help="the JSON Schema file, or - for stdin")
    js.add_argument(
        "--lenient",
        action="store_true",
        help="drop keywords that cannot be enforced exactly, with a warning, instead of "
        "refusing the schema",
    )
    js.add_argument(
        "--property-order",
        choices=("any", "strict_any", "declared"),
        default="any",
        help="'any' (default): object properties in any order, as a validator accepts them "
        "(an object past its budget: declared order, with a warning); 'strict_any': any "
        "order or refuse; 'declared': in the schema's order only (a smaller automaton)",
    )
    js.add_argument(
        "--closed-objects",
        action="store_true",
        help="objects that declare their properties accept no others unless the schema "
        "says so (additionalProperties: false where it is silent and that is a sound "
        "subset), so a model cannot invent keys",
    )
    js.add_argument(
        "--subsets",
        choices=("warn", "refuse"),
        default="warn",
        help="'warn' (default): a keyword that cannot be enforced exactly but has a sound "
        "subset (every accepted text valid) is compiled as that subset, with a warning "
        "naming it; 'refuse': such a schema is refused instead",
    )
    gr = sub.add_parser(
        "grammar",
        help="compile a Lark grammar file ('-' reads stdin) or a built-in: json, arithmetic",
        description="Compile a Lark EBNF grammar file ('-' reads stdin), or a built-in grammar "
        "by name (json, arithmetic), to a token-level pushdown automaton.",
    )
    gr.add_argument("grammar", help="the grammar file, - for stdin, or a built-in name")
    gr.add_argument("--start", default="start", help="the start rule (default: start)")
    for p in (rx, js, gr):
        p.add_argument(
            "--tokenizer",
            required=True,
            help="tokenizer.json, SentencePiece .model, or tekken .json file; 'default' is "
            "the bundled 32k tokenizer.model.v1",
        )
        p.add_argument("-o", "--output", required=True, help="the .npz tables file to write")
        p.add_argument(
            "--max-states", type=int, default=None, help="byte-DFA state budget (default 100000)"
        )
        p.add_argument(
            "--timeout",
            type=_seconds,
            default=None,
            metavar="S",
            help="give up (exit 2, naming where) after S seconds of compiling (default: none)",
        )
        p.add_argument(
            "--progress",
            action="store_true",
            default=None,
            help="show progress on stderr for compiles over a second even when stderr is not "
            "a terminal (default: only on a terminal)",
        )
    return parser


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status (0 done, 2 bad input)."""
    args = _parser().parse_args(argv)
    with plain_warnings():
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    from automata_compile import Vocabulary

    try:
        t0 = time.perf_counter()
        tokenizer = (
            default_tokenizer_path() if args.tokenizer == DEFAULT_TOKENIZER else args.tokenizer
        )
        vocab = Vocabulary.from_file(tokenizer)
        t1 = time.perf_counter()
        with progress(f"compiling the {args.kind}", enabled=args.progress):
            dfa = _compile(args, vocab)
        t2 = time.perf_counter()
        dfa.save(args.output)
    except (AutomataError, OSError) as e:
        print(error_line(e), file=sys.stderr)
        return 2
    print(
        json.dumps(
            {
                "output": args.output,
                "vocabulary": vocab.name,
                "vocab_size": vocab.size,
                "states": dfa.num_states,
                "classes": dfa.num_classes,
                "table_bytes": dfa.nbytes,
                "vocab_load_s": round(t1 - t0, 3),
                "compile_s": round(t2 - t1, 3),
            }
        )
    )
    return 0


def _compile(args: argparse.Namespace, vocab):
    from automata_compile import compile_grammar, compile_json_schema, compile_regex
    from automata_compile.automata import fsa as _fsa
    from automata_compile.pipeline import BUILTIN_GRAMMARS

    with _fsa.limits(args.timeout, f"the {args.kind}"):
        if args.kind == "regex":
            return compile_regex(args.pattern, vocab, max_states=args.max_states)
        elif args.kind == "grammar":
            if args.grammar in BUILTIN_GRAMMARS:
                text = args.grammar
            else:
                text = sys.stdin.read() if args.grammar == "-" else _read(args.grammar)
            return compile_grammar(text, vocab, start=args.start, max_states=args.max_states)
        text = sys.stdin.read() if args.schema == "-" else _read(args.schema)
        return compile_json_schema(
            text,
            vocab,
            strict=not args.lenient,
            property_order=args.property_order,
            closed_objects=args.closed_objects,
            subsets=args.subsets,
            max_states=args.max_states,
        )


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


if __name__ == "__main__":
    sys.exit(main())
