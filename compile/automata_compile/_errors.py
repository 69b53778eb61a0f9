"""The exception hierarchy shared by the compiler and the runtime.

Every error the library raises on bad input is an ``AutomataError``; the
subclasses name the cause, and the messages name the input, the place (regex
offset, JSON pointer, file) and what to do about it. Each subclass also derives
from the builtin it refines (``ValueError``) so generic handlers keep working.
"""

from __future__ import annotations


class AutomataError(Exception):
    """Base class of every error raised by automata_compile and automata_jax."""


class InvalidPatternError(AutomataError, ValueError):
    """A regular expression is malformed (what `re` itself would reject)."""

    def __init__(self, message: str, *, pattern: str | None = None, offset: int | None = None):
        self.pattern = pattern
        self.offset = offset
        super().__init__(_with_place(message, pattern, offset))


class UnsupportedPatternError(AutomataError, ValueError):
    """A well-formed regex uses a construct a finite automaton cannot express exactly
    (backreferences, lookaround, anchors in the middle, ...)."""

    def __init__(self, message: str, *, pattern: str | None = None, offset: int | None = None):
        self.pattern = pattern
        self.offset = offset
        super().__init__(_with_place(message, pattern, offset))


class EmptyLanguageError(AutomataError, ValueError):
    """The constraint accepts no string that the vocabulary can spell."""


class StateBudgetExceededError(AutomataError):
    """An automaton grew past the configured state budget."""


class CompileTimeoutError(AutomataError, TimeoutError):
    """A compile ran past its ``timeout_s`` (checked at the automaton core's budget
    checkpoints); the message names the step and, where known, the schema location.
    A sibling of `StateBudgetExceededError`, not a subclass: front ends that turn a
    too-large automaton into a refusal (``strict=False`` drops it) must not swallow it."""


class UnsupportedSchemaError(AutomataError, ValueError):
    """A JSON Schema keyword cannot be enforced exactly (strict mode refuses it)."""

    #: How the Python API spells the lenient mode in messages (`compile_json_schema`).
    API_KNOB = "strict=False"

    def __init__(self, message: str, *, keyword: str | None = None, pointer: str | None = None):
        self.keyword = keyword
        self.pointer = pointer
        super().__init__(message)

    def message_for(self, knob: str) -> str:
        """The message as an interface that spells the lenient mode ``knob`` shows it.

        A command line says ``--lenient`` where the Python API says ``strict=False``.
        """
        return str(self).replace(self.API_KNOB, knob)


class SubsetWarning(UserWarning):
    """A JSON Schema keyword is enforced as a named sound subset of its language: every
    accepted text is valid, some valid texts are not accepted (the default where exactness
    must give way; ``subsets="refuse"`` raises `UnsupportedSchemaError` instead).
    ``keyword``: the schema keyword; ``pointer``: its JSON pointer (``""`` for the root)."""

    def __init__(self, message: str, pointer: str = "", *, keyword: str = ""):
        super().__init__(message)
        self.pointer = pointer
        self.keyword = keyword


class OrderFallbackWarning(SubsetWarning):
    """A JSON Schema object is accepted in its declared property order only, where
    ``property_order="any"`` asked for any order but the object (or the schema with it)
    outgrew its automaton budget: a sound subset (every accepted text is valid).
    ``pointer``: the object's JSON pointer (``""`` for the root)."""

    def __init__(self, message: str, pointer: str = ""):
        super().__init__(message, pointer, keyword="properties")


class TokenSubsetWarning(SubsetWarning):
    """Some tokens are left out of the masks where they would take the grammar's stack
    into more contexts than the tables can hold (a token closing many nested values at
    once, each of which may return to many places): a sound subset at the token level
    (every accepted token is valid; the texts it would write stay reachable through
    shorter tokens). JSON Schema compiles it with ``subsets="warn"`` (the default)."""


class InvalidSchemaError(AutomataError, ValueError):
    """A JSON Schema (or dataclass) is malformed or contradictory."""

    def __init__(self, message: str, *, pointer: str | None = None):
        self.pointer = pointer
        super().__init__(message)


class DataclassParseError(AutomataError, ValueError):
    """A text is not a valid instance of the dataclass in the given format."""


class InvalidGrammarError(AutomataError, ValueError):
    """A grammar's text is malformed, or names an undefined rule / terminal (what lark rejects)."""


class UnsupportedGrammarError(AutomataError, ValueError):
    """A well-formed grammar cannot be compiled to a deterministic pushdown automaton
    (a conflict, left recursion, templates, declared terminals, ...)."""

    def __init__(self, message: str, *, rules: tuple[str, ...] = (), example: bytes | None = None):
        self.rules = rules
        self.example = example
        super().__init__(message)


class GrammarConflictError(UnsupportedGrammarError):
    """The next byte cannot decide between two moves (shift / enter a rule / end a rule):
    the grammar is ambiguous or needs more lookahead than one byte."""


class LeftRecursionError(UnsupportedGrammarError):
    """A rule can reach itself without consuming input (left recursion that is not the
    immediate ``a: a x | y`` form, which is rewritten)."""


class VocabularyError(AutomataError, ValueError):
    """A tokenizer file cannot be read as a vocabulary."""


class GGUFError(VocabularyError):
    """A GGUF file is unreadable or truncated, or holds a tokenizer or model this library
    cannot use (the message names the file and the metadata key or tensor)."""


class IncompatibleVocabularyError(AutomataError, ValueError):
    """Tables compiled for one vocabulary were used with another."""


class TableFormatError(AutomataError, ValueError):
    """A tables artifact is corrupt, foreign, or of an unknown format version."""


def _with_place(message: str, pattern: str | None, offset: int | None) -> str:
    if pattern is None:
        return message
    if offset is None:
        return f"{message} in pattern {_clip(pattern)}"
    # Show a window of the pattern around the offset, with a caret under it.
    lo = max(0, offset - _WINDOW)
    hi = min(len(pattern), offset + _WINDOW)
    shown = ("…" if lo else "") + pattern[lo:hi] + ("…" if hi < len(pattern) else "")
    caret = (1 if lo else 0) + offset - lo
    shown_line = shown.replace("\n", "\\n")
    caret_col = len(shown[:caret].replace("\n", "\\n"))
    return f"{message} at offset {offset} in pattern\n  {shown_line}\n  {' ' * caret_col}^"


_WINDOW = 40


def _clip(pattern: str) -> str:
    return (
        repr(pattern)
        if len(pattern) <= 2 * _WINDOW
        else repr(pattern[: 2 * _WINDOW]) + f"… ({len(pattern)} characters)"
    )
