"""Command line: ``python -m automata_compile regex PATTERN --tokenizer PATH -o out.npz``.

Also ``json-schema FILE`` (a JSON Schema file, ``-`` for stdin) and ``grammar FILE``
(a Lark grammar file, ``-`` for stdin, or a built-in name: ``json``, ``arithmetic``;
``--start RULE``). Prints the
table sizes and the compile time; bad input exits with status 2 and the
error's message.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from automata_compile._errors import AutomataError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m automata_compile", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="kind", required=True)
    rx = sub.add_parser("regex", help="compile a regular expression")
    rx.add_argument("pattern")
    js = sub.add_parser("json-schema", help="compile a JSON Schema file ('-' = stdin)")
    js.add_argument("schema")
    js.add_argument(
        "--lenient", action="store_true", help="drop unenforceable keywords with a warning"
    )
    gr = sub.add_parser("grammar", help="compile a Lark grammar file ('-' = stdin) or built-in")
    gr.add_argument("grammar")
    gr.add_argument("--start", default="start", help="the start rule (default: start)")
    for p in (rx, js, gr):
        p.add_argument(
            "--tokenizer",
            required=True,
            help="tokenizer.json, SentencePiece .model, or tekken .json",
        )
        p.add_argument("-o", "--output", required=True, help="the .npz tables file to write")
        p.add_argument(
            "--max-states", type=int, default=None, help="byte-DFA state budget (default 100000)"
        )
    args = parser.parse_args(argv)

    from automata_compile import Vocabulary, compile_grammar, compile_json_schema, compile_regex
    from automata_compile.frontends.grammar._compile import BUILTIN_GRAMMARS

    try:
        t0 = time.perf_counter()
        vocab = Vocabulary.from_file(args.tokenizer)
        t1 = time.perf_counter()
        if args.kind == "regex":
            dfa = compile_regex(args.pattern, vocab, max_states=args.max_states)
        elif args.kind == "grammar":
            if args.grammar in BUILTIN_GRAMMARS:
                text = args.grammar
            else:
                text = sys.stdin.read() if args.grammar == "-" else _read(args.grammar)
            dfa = compile_grammar(text, vocab, start=args.start, max_states=args.max_states)
        else:
            text = sys.stdin.read() if args.schema == "-" else _read(args.schema)
            dfa = compile_json_schema(
                text, vocab, strict=not args.lenient, max_states=args.max_states
            )
        t2 = time.perf_counter()
        dfa.save(args.output)
    except AutomataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
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


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


if __name__ == "__main__":
    sys.exit(main())
