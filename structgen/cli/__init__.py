"""The ``structgen`` command: ``extract`` (schema-driven extraction), ``generate``, ``serve``.

This module holds the parser, the three commands and ``main``; ``structgen.cli.inputs``
reads and checks their inputs before any model loads. Errors print one line on stderr
(``structgen: error: ...``) and exit non-zero, never a traceback: 2 for bad input (schema,
arguments, an input too long for the model's context), 1 for failures while running.
Ctrl-C exits 130 with one line on stderr, ``structgen: interrupted`` (a JSON Lines
extraction's says how many texts finished and were written).

An input too long for the model's context is refused before anything runs, by both
``generate`` (its prompt) and ``extract`` (a text's extraction prompt: the text with the
schema, in the chat template), in one message naming both lengths: ``prompt has N tokens;
this engine's context allows at most M (...)`` (``Engine.check_prompt_fits``; for a text,
``extract``'s own ``ExtractionPromptTooLongError``). A single
such input exits 2; in a JSON Lines batch it is that line's error line (``FILE:LINE:
prompt has ...``) and counts among the failed texts (exit 1 for the batch).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import re
import socket
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from structgen.cli.inputs import CliError, load_schema, open_output, read_constraint, read_texts
from structgen.errors import ConfigError, ExtractionError, PromptTooLongError, StructgenError
from structgen.runtime.sampling_params import SamplingParams

__all__ = ["main"]


def _engine(args: argparse.Namespace) -> Any:
    """The command's engine. ``args.constrained`` (set by the command): it compiles a
    grammar, so the engine's vocabulary preparation (a background thread) is waited for
    before the start-up is frozen (``_start_up_gc``): its tables are frozen with the model.
    """
    from structgen.runtime.engine import Engine

    quantization = getattr(args, "quantization", None)
    with _engine_settings_as_flags():
        engine = Engine(
            args.model, **({} if quantization is None else {"quantization": quantization})
        )
    after_load = getattr(args, "after_load", None)  # set by _start_up_gc
    if after_load is not None:
        if getattr(args, "constrained", False):
            _ = engine.vocab  # waits for its preparation
        after_load()
    return engine


# the flag of each EngineConfig field the commands set
_ENGINE_FLAGS = {
    "quantization": "--quantization",
    "dtype": "--dtype",
    "max_running_requests": "--max-running-requests",
    "max_kv_tokens": "--max-kv-tokens",
    "max_model_len": "--max-model-len",
    "page_size": "--page-size",
    "tensor_parallel_size": "--tp",
    "data_parallel_size": "--dp",
    "dist_timeout_s": "--dist-timeout",
}


@contextlib.contextmanager
def _engine_settings_as_flags() -> Iterator[None]:
    """An engine's ``ConfigError`` raised inside, as a CliError (exit 2) whose message names
    each ``EngineConfig.<field>`` by its flag (``EngineConfig.max_model_len=100000 is ...``
    -> ``--max-model-len 100000 is ...``): the command line's terms, not the API's.
    """
    try:
        yield
    except ConfigError as exc:
        message = str(exc)
        for field, flag in _ENGINE_FLAGS.items():
            message = message.replace(f"EngineConfig.{field}=", f"{flag} ")
            message = message.replace(f"EngineConfig.{field}", flag)
        raise CliError(message) from None


@contextlib.contextmanager
def _start_up_gc(args: argparse.Namespace) -> Iterator[None]:
    """A one-shot command's start-up (the engine's imports and load) without the cyclic
    garbage collector, and what it built frozen once the engine is loaded (``gc.freeze``,
    through ``args.after_load``, which :func:`_engine` calls): later collections of the
    run do not scan the modules, the model and the vocabulary again.

    On exit the collector is as it was (``gc.unfreeze``, enabled again), so an in-process
    caller of :func:`main` keeps its own. Nothing is changed where the collector is off or
    objects are frozen already (the caller's policy). Raises: never.
    """
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    frozen = []

    def after_load() -> None:
        if not frozen:
            gc.freeze()
            frozen.append(True)
            gc.enable()

    gc.disable()
    args.after_load = after_load
    try:
        yield
    finally:
        if frozen:
            gc.unfreeze()
        gc.enable()


class _BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a JSON Lines extraction; ``str()`` is the line saying how many texts
    finished and were written (``BatchWriter.interrupted``), which :func:`main` prints.
    """


def cmd_extract(args: argparse.Namespace) -> int:
    """``structgen extract``: print one JSON object per input text.

    Every text runs in one continuously batched job; results are written as they finish,
    in input order (a JSON Lines input gives one line per text, ``{"error", "raw_text"}``
    for a text that failed, and a progress bar and a summary on stderr). An output cut by
    ``max_tokens`` that the grammar had closed is printed and reported on stderr. Ctrl-C
    stops the job with exit code 130 and, on JSON Lines input, a line on stderr saying how
    many texts finished and were written and the first one not written.
    """
    import warnings

    from structgen.cli.batch import BatchWriter
    from structgen.errors import ExtractionTruncatedWarning, GrammarWarning

    if args.text is not None and not args.text.strip():  # before the schema's compile
        raise CliError("the text is empty: there is nothing to extract from", code=1)
    schema = load_schema(args.schema)
    texts, lines = read_texts(args)
    where = (lambda i: f"{args.input}:{lines[i]}") if lines is not None else (lambda i: "text")
    if lines is None and not texts[0].strip():
        raise CliError("the text is empty: there is nothing to extract from", code=1)
    from structgen.extraction import extract  # after every input check

    out = open_output(args.output)
    kept = [i for i, t in enumerate(texts) if t.strip()]  # blank JSON lines: errors, no model
    args.constrained = True
    engine = _engine(args) if kept else None
    params = SamplingParams(max_tokens=args.max_tokens, temperature=0.0)
    batch = BatchWriter(lambda res, name: _write_result(out, res, name), len(texts), where,
                        lines is not None, args.max_tokens)  # fmt: skip
    try:
        for i, t in enumerate(texts):
            if not t.strip():
                batch.on_result(
                    i, ExtractionError("the text is empty: there is nothing to extract from")
                )
        if kept:
            with warnings.catch_warnings():  # reported above, one line per text
                warnings.simplefilter("ignore", ExtractionTruncatedWarning)
                warnings.simplefilter("ignore", GrammarWarning)  # printed by load_schema
                extract(engine, schema, [texts[i] for i in kept], params=params, errors="return",
                        return_details=True, copy=False if args.no_copy else None,
                        on_result=lambda j, res: batch.on_result(kept[j], res))  # fmt: skip
    except KeyboardInterrupt:
        if lines is not None:  # main prints the line: here, what finished and was written
            raise _BatchInterrupted(batch.interrupted()) from None
        raise
    finally:
        batch.close()
        if out is not sys.stdout:
            out.close()
    if lines is not None:
        print(f"structgen: {batch.summary()}", file=sys.stderr, flush=True)
    if batch.failed:
        raise CliError(f"{len(batch.failed)} of {len(texts)} extractions failed", code=1)
    return 0


def _write_result(out: Any, res: Any, where: str | None) -> None:
    """One result line: the object, or for a failed JSON Lines text (``where`` is its
    ``FILE:LINE``) its error line ``{"error", "raw_text"}``; a failed single text
    (``where`` None) raises CliError.
    """
    if isinstance(res, ExtractionError):
        # the API's message names max_tokens; on the command line that is --max-tokens
        by_max_tokens = res.cut_by is not None and res.cut_by.name == "max_tokens"
        flag = " (--max-tokens)" if by_max_tokens else ""
        if where is None and isinstance(res, PromptTooLongError):
            raise CliError(str(res), code=2)  # bad input, as generate's prompt too long
        if where is None:
            raw = f" (raw output: {res.raw_text!r})" if res.raw_text else ""
            raise CliError(f"{res}{flag}{raw}", code=1)
        value: Any = {"error": f"{where}: {res}{flag}", "raw_text": res.raw_text}
    else:
        value = res.value
        if hasattr(value, "model_dump"):
            value = value.model_dump(mode="json")
    out.write(json.dumps(value, ensure_ascii=False) + "\n")
    out.flush()


def cmd_generate(args: argparse.Namespace) -> int:
    """``structgen generate``: print the generated text.

    Returns 0, or raises CliError (exit 1) after printing an output that ``--max-tokens``
    (or the end of the model's context) cut before it matched the constraint; a cut that
    the budget-aware matcher closed validly, or an unconstrained one, is a warning on
    stderr naming which limit cut it.
    """
    import warnings

    from structgen.errors import GrammarWarning, length_cut

    if not args.prompt.strip():
        raise CliError("--prompt is empty: give the text to generate from")
    constraint = read_constraint(args)
    if args.seed is not None and args.temperature == 0:
        print(
            "structgen: warning: --seed has no effect without --temperature "
            "(generate is greedy by default)",
            file=sys.stderr,
        )
    params = SamplingParams(
        max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed
    )
    args.constrained = constraint is not None
    engine = _engine(args)
    prompt = [{"role": "user", "content": args.prompt}] if not args.raw else args.prompt
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GrammarWarning)  # printed when the file was read
        out = engine.generate([prompt], params, constraint)[0]
    if out.finish_reason == "error":
        raise CliError(f"generation failed: {out.error}", code=1)
    print(out.text, flush=True)
    if out.finish_reason != "length":
        return 0
    by, fix = length_cut(
        len(out.token_ids), args.max_tokens, engine.max_request_tokens(), "raise --max-tokens"
    )
    cut = f"structgen: warning: cut by {by}"
    if constraint is None:
        print(f"{cut}; {fix} for a longer output", file=sys.stderr)
        return 0
    if constraint.compile(engine.vocab).matches(out.text):  # compiled above: a cache hit
        print(
            f"{cut}: the constraint closed the output early (valid, but it may be shorter "
            f"than without the limit); {fix} for the whole output",
            file=sys.stderr,
        )
        return 0
    raise CliError(
        f"cut by {by} before the output matched the constraint (printed above, incomplete); {fix}",
        code=1,
    )


def cmd_serve(args: argparse.Namespace) -> int:
    """``structgen serve``: the OpenAI-compatible HTTP server (needs the ``server`` extra)."""
    try:
        import uvicorn

        from structgen.server import create_app
    except ImportError as exc:
        raise CliError(
            f"the server needs its extra: pip install 'structgen[server]' ({exc})"
        ) from exc
    from structgen.runtime.async_engine import AsyncEngine

    sock = _listening_socket(args.host, args.port)  # a taken port fails before the model loads
    settings = {
        k: v
        for k, v in {
            "dtype": args.dtype,
            "max_running_requests": args.max_running_requests,
            "max_kv_tokens": args.max_kv_tokens,
            "max_model_len": args.max_model_len,
            "page_size": args.page_size,
            "tensor_parallel_size": args.tp,
            "data_parallel_size": args.dp,
            "dist_timeout_s": args.dist_timeout,
        }.items()
        if v is not None
    }
    try:
        with _engine_settings_as_flags():
            engine = AsyncEngine(args.model, **settings)  # --dp > 1: AsyncDataParallelEngine
    except BaseException:
        sock.close()  # the engine did not start: the port is free again
        raise
    app = create_app(
        engine, served_model_name=args.served_model_name, api_key=args.api_key, max_n=args.max_n
    )
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        engine.shutdown()
        sock.close()
    return 0


def _listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``(host, port)`` for the server, made before the model loads
    (an IPv6 host when it contains ``:``; ``SO_REUSEADDR`` as uvicorn sets it).

    Raises:
        CliError: (exit code 2) the address cannot be bound: in use, not this machine's,
            or a port below 1024 without the right to it.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CliError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; pick another --port/--host"
        ) from exc
    sock.set_inheritable(True)
    return sock


_QUANTIZATION_HELP = (
    "EngineConfig.quantization: gguf (keep a GGUF file's blocks quantized), int8, int4, ..., "
    "none (float weights: exact); default auto (gguf for a GGUF file on CPU)"
)


def _sampling_arg(field: str, convert: type):
    """The argparse type of the flag that sets ``SamplingParams.<field>``: ``convert``s the
    text, then lets ``SamplingParams`` itself check the value, so the flag accepts what the
    API accepts and its message is the API's, without the ``SamplingParams.<field>`` prefix
    (the flag is named by argparse). Raises argparse.ArgumentTypeError (a usage error, exit
    2) before any schema or model work.
    """

    def parse(text: str):
        value = convert(text)  # ValueError: argparse's "invalid <type> value: <text>"
        try:
            SamplingParams(**{field: value})
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(
                str(exc).removeprefix(f"SamplingParams.{field} ")
            ) from None
        return value

    parse.__name__ = convert.__name__  # argparse names the type in "invalid <type> value"
    return parse


def _port(text: str) -> int:
    """The argparse type of ``--port``: a TCP port, 0 to 65535 (0: the system picks one)."""
    port = int(text)  # ValueError: argparse's "invalid int value"
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port from 0 to 65535, got {port}")
    return port


def _at_least(low: int):
    """The argparse type of an int flag that must be >= ``low``."""

    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an int >= {low}, got {value}")
        return value

    parse.__name__ = "int"  # argparse names the type in "invalid int value"
    return parse


_positive = _at_least(1)
_seed = _at_least(0)  # the sampler seeds a PCG64 / torch generator with it: no negative seed
_port.__name__ = "int"
_LOG_LEVELS = ["critical", "error", "warning", "info", "debug", "trace"]  # uvicorn's
_token_count = _sampling_arg("max_tokens", int)
_temperature = _sampling_arg("temperature", float)


def _help_text(doc: str | None) -> str:
    """The first line of a docstring as ``--help`` shows it, without reST's double
    backticks around code; "" for no docstring (``python -OO``). Raises: never.
    """
    lines = (doc or "").strip().splitlines()
    return re.sub(r"``(.*?)``", r"\1", lines[0]) if lines else ""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``structgen`` command (help texts without reST markup)."""
    from structgen import __version__

    parser = argparse.ArgumentParser(prog="structgen", description=_help_text(__doc__))
    parser.add_argument("--version", action="version", version=f"structgen {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    ex = sub.add_parser(
        "extract",
        help="extract a schema-valid JSON object from text",
        description=_help_text(cmd_extract.__doc__),
    )
    ex.add_argument("--schema", required=True, help="JSON Schema file")
    src = ex.add_mutually_exclusive_group()
    src.add_argument("--text", help="the text to extract from")
    src.add_argument(
        "--input",
        help="a text file (the whole file is one document), or a .jsonl file (one document "
        "per non-blank line: a JSON string or an object with 'text'; one result line each)",
    )
    ex.add_argument("--output", default=None, help="write the results here (default: stdout)")
    ex.add_argument("--model", default=None, help="a .gguf file or HF folder (default: SmolLM2)")
    ex.add_argument(
        "--max-tokens",
        type=_token_count,
        default=512,
        help="most tokens per document (default 512); the JSON closes within it where the "
        "schema allows (the output is then marked truncated)",
    )
    ex.add_argument("--quantization", default=None, help=_QUANTIZATION_HELP)
    ex.add_argument(
        "--no-copy",
        action="store_true",
        help="no copy constraints: string and number values follow the schema only, not "
        "spans and numerals of the text (x-structgen-copy in the schema still applies)",
    )
    ex.set_defaults(func=cmd_extract)

    ge = sub.add_parser(
        "generate",
        help="generate text, optionally under a constraint",
        description=_help_text(cmd_generate.__doc__),
    )
    ge.add_argument("--prompt", required=True, help="the user message (sent as is with --raw)")
    cons = ge.add_mutually_exclusive_group()
    cons.add_argument("--regex", help="the output fully matches this regex (Python syntax)")
    cons.add_argument("--schema", help="JSON Schema file")
    cons.add_argument("--choice", help="comma-separated options, e.g. yes,no")
    cons.add_argument("--grammar", help="a Lark, GBNF or EBNF grammar file")
    ge.add_argument(
        "--syntax",
        default=None,
        choices=["auto", "lark", "gbnf", "ebnf"],
        help="the --grammar file's syntax (default auto: '::=' rules are GBNF, 'name:' rules Lark)",
    )
    ge.add_argument("--raw", action="store_true", help="send the prompt as is, no chat template")
    ge.add_argument("--model", default=None, help="a .gguf file or HF folder (default: SmolLM2)")
    ge.add_argument("--quantization", default=None, help=_QUANTIZATION_HELP)
    ge.add_argument(
        "--max-tokens",
        type=_token_count,
        default=256,
        help="most tokens to generate (default 256); under a constraint the output closes "
        "within it where it can",
    )
    ge.add_argument(
        "--temperature", type=_temperature, default=0.0, help="sampling temperature (0: greedy)"
    )
    ge.add_argument(
        "--seed", type=_seed, default=None, help="sampling seed, >= 0 (reproducible output)"
    )
    ge.set_defaults(func=cmd_generate)

    se = sub.add_parser(
        "serve",
        help="run the OpenAI-compatible HTTP server",
        description=_help_text(cmd_serve.__doc__),
    )
    se.add_argument("--model", default=None, help="a .gguf file or HF folder (default: SmolLM2)")
    se.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    se.add_argument("--port", type=_port, default=30000, help="TCP port (default 30000)")
    se.add_argument("--served-model-name", default=None, help="the model name clients use")
    se.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY'")
    se.add_argument(
        "--max-running-requests", type=int, default=None, help="requests decoded together at most"
    )
    se.add_argument("--max-kv-tokens", type=int, default=None, help="KV cache capacity in tokens")
    se.add_argument(
        "--max-model-len",
        type=int,
        default=None,
        help="most tokens a request holds, prompt included (default: the model's context)",
    )
    se.add_argument("--page-size", type=int, default=None, help="KV cache page size in tokens")
    se.add_argument("--dtype", default=None, help="float32, bfloat16, float16 or auto")
    se.add_argument("--tp", type=int, default=None, help="tensor-parallel ranks per replica")
    se.add_argument(
        "--dp",
        type=int,
        default=None,
        help="data-parallel replicas behind a prefix-cache-aware router",
    )
    se.add_argument(
        "--dist-timeout",
        type=float,
        default=None,
        help="seconds a collective waits for another rank (default 60)",
    )
    se.add_argument("--max-n", type=_positive, default=16, help="largest n accepted")
    se.add_argument("--log-level", default="info", choices=_LOG_LEVELS, help="uvicorn's log level")
    se.set_defaults(func=cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 runtime failure, 2 bad input, 130
    interrupted by Ctrl-C: ``structgen: interrupted`` on stderr, or for a JSON Lines
    extraction the line saying how many texts finished and were written).
    """
    args = build_parser().parse_args(argv)
    one_shot = args.func is not cmd_serve
    try:
        with _start_up_gc(args) if one_shot else contextlib.nullcontext():
            return args.func(args)
    except CliError as exc:
        print(f"structgen: error: {exc}", file=sys.stderr)
        return exc.code
    except StructgenError as exc:
        code = 2 if isinstance(exc, ValueError) else 1
        print(f"structgen: error: {exc}", file=sys.stderr)
        return code
    except KeyboardInterrupt as exc:  # Ctrl-C: one line, whichever command it stopped
        line = str(exc) if isinstance(exc, _BatchInterrupted) else "interrupted"
        print(f"structgen: {line}", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":
    sys.exit(main())
