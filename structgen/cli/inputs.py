"""The ``structgen`` command's inputs, read and checked before any model loads.

``--schema``, ``--regex`` and ``--grammar`` are checked torch-free first (a JSON or syntax
error, a keyword structgen refuses is named in a second), then compiled once without a
vocabulary (no model loads), so that every error and compile warning is
reported before the model loads; ``--choice`` is split into its options; ``--text`` /
``--input`` / stdin are read and ``--output`` is opened. Every failure is a ``CliError``
(one line on stderr, exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from structgen.errors import InvalidSchemaError, StructgenError

__all__ = [
    "CliError",
    "load_schema",
    "load_grammar",
    "read_constraint",
    "read_texts",
    "open_output",
]


class CliError(Exception):
    """A user-facing CLI failure with its exit code (2: bad input, 1: failure while
    running); ``structgen.cli.main`` prints it as one line.
    """

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def _not_a_file(p: Path) -> str:
    """Why ``p``, which is not a regular file, cannot be read: ``not found``, ``is a
    directory`` or ``is not a regular file``, for a message ``"<what> file {why}: PATH"``.
    """
    if not p.exists():
        return "not found"
    return "is a directory" if p.is_dir() else "is not a regular file"


def load_schema(path: str) -> dict:
    """Read and check a schema file before any model is loaded.

    The schema is lowered once, torch-free (``structgen.fsm.spec.lower_spec``), and that
    lowering is compiled without a vocabulary; compile warnings are printed on stderr.

    Returns:
        The schema (a dict, or a bool).

    Raises:
        CliError: file missing, not JSON, not valid against its metaschema, or using a
            keyword structgen cannot enforce (named with its JSON pointer).
    """
    import jsonschema

    from structgen.fsm.json_schema.check import check_schema
    from structgen.fsm.json_schema.ids import check_schema_depth
    from structgen.fsm.nesting import loads
    from structgen.fsm.spec import JsonSchema, lower_spec

    p = Path(path)
    if not p.is_file():
        raise CliError(f"schema file {_not_a_file(p)}: {path}")
    try:
        schema = loads(p.read_text(encoding="utf-8"))  # any nesting, up to its depth limit
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CliError(f"schema file {path} is not valid JSON: {exc}") from None
    except StructgenError as exc:
        raise CliError(f"schema file {path}: {exc}") from None
    if not isinstance(schema, (dict, bool)):
        raise CliError(f"schema file {path} must hold a JSON object")
    try:
        check_schema_depth(schema)  # before any recursive walk
        if isinstance(schema, dict):
            check_schema(schema)  # jsonschema's verdict, at any depth
    except InvalidSchemaError as exc:
        cause = exc.__cause__
        detail = cause.message if isinstance(cause, jsonschema.SchemaError) else str(exc)
        raise CliError(
            f"schema {path} is not a valid JSON Schema at {exc.pointer or '/'}: {detail}"
        ) from None
    except StructgenError as exc:
        raise CliError(f"schema {path}: {exc}") from None
    spec = JsonSchema(schema, allow_extra_properties=False)
    try:  # torch-free: a keyword structgen refuses fails here, in a second
        lowered = lower_spec(spec)  # what the compile compiles, so it is not lowered twice
    except StructgenError as exc:
        raise CliError(f"schema {path}: {exc}") from None
    from structgen.fsm.compiler import compile_spec

    try:
        grammar = compile_spec(spec, None, lowered=lowered)
    except StructgenError as exc:
        raise CliError(f"schema {path}: {exc}") from None
    _print_warnings(f"schema {path}", grammar.reported_warnings)
    return schema


def load_grammar(path: str, syntax: str) -> Any:
    """The ``Grammar`` spec of a grammar file, compiled once to check it.

    Args:
        path: the grammar file.
        syntax: ``"auto"``, ``"lark"``, ``"gbnf"`` or ``"ebnf"`` (``--syntax``).

    Raises:
        CliError: the file cannot be read, or the grammar does not compile.
    """
    from structgen.fsm.spec import Grammar

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CliError(f"--grammar: cannot read {path}: {exc.strerror}") from None
    from structgen.fsm.grammar import parse_grammar

    spec = Grammar(text, syntax=syntax)
    _check_auto_syntax(text, syntax, path)
    try:
        parse_grammar(text, syntax)  # torch-free: a syntax error is named in a second
        grammar = spec.compile(None)
    except StructgenError as exc:
        raise CliError(f"--grammar {path}: {exc}") from None
    _print_warnings(f"--grammar {path}", grammar.reported_warnings)
    return spec


def _check_auto_syntax(text: str, syntax: str, path: str) -> None:
    """Check that ``--syntax auto`` tells the grammar file's syntax (``::=`` rules: GBNF,
    ``name:`` rules: Lark).

    Raises:
        CliError: ``auto`` cannot tell it (both kinds of rule, or neither): the message,
            fsm's, asks for the ``--syntax`` flag instead of the Python keyword.
    """
    from structgen.fsm.grammar import undecided_syntax

    reason = undecided_syntax(text) if syntax == "auto" else None
    if reason is not None:
        raise CliError(f"--grammar {path}: {reason}; pass --syntax lark, gbnf or ebnf")


def read_constraint(args: argparse.Namespace) -> Any:
    """``generate``'s constraint: the spec of ``--regex``, ``--schema``, ``--choice`` or
    ``--grammar`` (at most one is given), checked; None without one.

    Raises:
        CliError: the constraint is malformed or does not compile, or ``--syntax`` is
            given without ``--grammar`` (exit 2).
    """
    from structgen.fsm.spec import Choice, JsonSchema, Regex

    syntax = getattr(args, "syntax", None)
    if syntax is not None and args.grammar is None:
        raise CliError(f"--syntax {syntax} goes with --grammar FILE (it is that file's syntax)")
    if args.regex is not None:
        from structgen.fsm.regex.parse import parse

        try:
            parse(args.regex)  # torch-free: a syntax error is named in a second
            from structgen.fsm import compile_regex

            compile_regex(args.regex)
        except StructgenError as exc:
            raise CliError(f"--regex: {exc}") from None
        return Regex(args.regex)
    if args.schema is not None:
        return JsonSchema(load_schema(args.schema))
    if args.choice is not None:
        options = [c for c in args.choice.split(",") if c]
        if not options:
            raise CliError("--choice needs comma-separated options")
        return Choice(options)
    if args.grammar is not None:
        return load_grammar(args.grammar, syntax or "auto")
    return None


#: the ``--input`` name endings (compared lowercased) read as JSON Lines, one text a line
JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")


def read_texts(args: argparse.Namespace) -> tuple[list[str], list[int] | None]:
    """``extract``'s texts: ``--text``, the ``--input`` file, or stdin.

    Returns:
        The texts, and for a JSON Lines input (``.jsonl`` or ``.ndjson``, any case: one
        JSON string or object with ``"text"`` per non-blank line) each text's line number
        (one result line per text); None for a single text.

    Raises:
        CliError: the input file is missing, a directory or not UTF-8, a JSON line is
            malformed, or there is no input (no ``--text``, no ``--input``, stdin a
            terminal).
    """
    if args.text is not None:
        return [args.text], None
    if args.input is not None:
        p = Path(args.input)
        if not p.is_file():
            raise CliError(f"input file {_not_a_file(p)}: {args.input}")
        try:
            content = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise CliError(f"input file {args.input} is not UTF-8 text: {exc}") from None
        if p.suffix.lower() in JSON_LINES_SUFFIXES:
            texts, lines = [], []
            for n, line in enumerate(content.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except json.JSONDecodeError:
                    raise CliError(f"{args.input}:{n}: not a JSON line") from None
                if isinstance(item, dict) and isinstance(item.get("text"), str):
                    item = item["text"]
                if not isinstance(item, str):
                    raise CliError(f"{args.input}:{n}: expected a string or an object with 'text'")
                texts.append(item)
                lines.append(n)
            return texts, lines
        return [content], None
    if sys.stdin is None or sys.stdin.isatty():
        raise CliError("no input: give --text, --input FILE, or pipe text on stdin")
    return [sys.stdin.read()], None


def open_output(path: str | None) -> Any:
    """``--output FILE`` opened for writing (before the model loads; the caller closes
    it), or stdout.

    Raises:
        CliError: the file cannot be opened for writing.
    """
    if path is None:
        return sys.stdout
    try:
        return open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by cmd_extract
    except OSError as exc:
        raise CliError(f"cannot write --output {path}: {exc.strerror}") from None


def _print_warnings(what: str, warnings: Sequence[str]) -> None:
    """One ``structgen: warning:`` line on stderr per reported compile warning of ``what``
    (an ignored unknown keyword, an approximated construct).
    """
    for w in warnings:
        print(f"structgen: warning: {what}: {w}", file=sys.stderr, flush=True)
