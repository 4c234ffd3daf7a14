r"""The user-facing entry points: ``@structgen.function`` programs and ``structgen.template``.

::

    @structgen.function
    def qa(s, question):
        s += "Q: " + question + "\nA:" + structgen.gen("answer", stop="\n")

    state = qa.run(question="2+2?")            # default backend
    print(state["answer"])
    for chunk in qa.run(question="...", stream=True):
        print(chunk, end="")
    states = qa.run_batch([{"question": q} for q in qs], progress_bar=True)

    form = structgen.template("Name: {name}\nAge: {age:int}\n")
    form.run(prompt="Maria Lopez, 34.\n")         # {"name": "Maria Lopez", "age": 34}
    form.run(prompt=..., copy_from=text)          # holes are spans of text

Programs and templates are the user-facing entry points: they build a
:class:`~structgen.lang.state.ProgramState` on a backend, whose ``+=`` hands each
expression to the runner (``structgen.lang.driver``).
"""

from __future__ import annotations

import functools
import queue
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Mapping

from structgen.errors import ProgramError, RequestError
from structgen.lang import expr as E
from structgen.lang.backend import as_backend
from structgen.lang.state import ProgramState
from structgen.lang.template import Template, TemplateResult

__all__ = ["Program", "function", "StreamingRun", "TemplateProgram", "template"]

RESERVED = ("backend", "stream", "progress_bar")


class Program:
    """A structgen program: ``fn(s, *args, **kwargs)`` appends to the state ``s``.

    Build it with :func:`function`. Calling it directly runs it (like :meth:`run`).
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise RequestError("structgen.function needs a function")
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the program: the same as :meth:`run` with the same arguments."""
        return self.run(*args, **kwargs)

    def _execute(self, state: ProgramState, args: tuple, kwargs: dict) -> ProgramState:
        _check_arguments(self.fn, args, kwargs)
        try:
            self.fn(state, *args, **kwargs)
        except ProgramError:
            raise
        except Exception as exc:
            raise _program_error(self.fn, exc) from exc
        return state

    def run(
        self, *args: Any, backend: Any = None, stream: bool = False, **kwargs: Any
    ) -> ProgramState | "StreamingRun":
        """Run the program once.

        Args:
            *args: the program's own positional arguments.
            **kwargs: the program's own keyword arguments.
            backend: an Engine; None = the default backend (``set_default_backend``,
                else a default ``Engine()`` created once).
            stream: return a :class:`StreamingRun` that yields text as it is produced.

        Returns:
            The final ProgramState (or the StreamingRun).

        Raises:
            ProgramError: the program raised (message names the program's line; the
                original exception is ``__cause__``). The engine stays usable.
        """
        b = as_backend(backend)
        if stream:
            return StreamingRun(self, b, args, kwargs)
        return self._execute(ProgramState(b), args, kwargs)

    def run_batch(
        self,
        batch_kwargs: list[dict],
        backend: Any = None,
        progress_bar: bool = True,
        num_threads: int = 16,
        errors: str = "raise",
    ) -> list[Any]:
        """Run the program once per kwargs dict, concurrently (continuously batched).

        Each run is a thread; their generation calls join the same engine steps.

        Args:
            batch_kwargs: one dict of program arguments per run.
            backend: as in :meth:`run`.
            progress_bar: show a tqdm bar over finished runs.
            num_threads: runs in flight at once.
            errors: ``"raise"``: raise the first ProgramError after every run ended;
                ``"return"``: put the ProgramError in that run's place.

        Returns:
            One ProgramState (or ProgramError) per dict, in order.

        Raises:
            RequestError: ``batch_kwargs`` is not a list of dicts, or ``errors`` is neither
                ``"raise"`` nor ``"return"``.
        """
        from tqdm.auto import tqdm

        if errors not in ("raise", "return"):
            raise RequestError("errors must be 'raise' or 'return'")
        if isinstance(batch_kwargs, (Mapping, str)) or not hasattr(batch_kwargs, "__iter__"):
            one_run = (
                " (for one run, call run(**kwargs))" if isinstance(batch_kwargs, Mapping) else ""
            )
            raise RequestError(
                "run_batch takes a list of dicts of program arguments, one per run; got "
                f"{type(batch_kwargs).__name__}{one_run}"
            )
        batch_kwargs = list(batch_kwargs)
        for i, kwargs in enumerate(batch_kwargs):
            if not isinstance(kwargs, Mapping):
                raise RequestError(
                    f"run_batch: batch_kwargs[{i}] must be a dict of program arguments, got "
                    f"{type(kwargs).__name__}"
                )
        b = as_backend(backend)
        results: list[Any] = [None] * len(batch_kwargs)
        bar = tqdm(total=len(batch_kwargs), desc=self.fn.__name__, disable=not progress_bar)

        def one(i: int) -> None:
            try:
                results[i] = self._execute(ProgramState(b), (), dict(batch_kwargs[i]))
            except ProgramError as exc:
                results[i] = exc
            bar.update(1)

        with ThreadPoolExecutor(max_workers=max(1, min(num_threads, len(batch_kwargs)))) as pool:
            list(pool.map(one, range(len(batch_kwargs))))
        bar.close()
        if errors == "raise":
            for r in results:
                if isinstance(r, ProgramError):
                    raise r
        return results


class StreamingRun:
    """An iterator over a program's text as it is produced (fixed text and tokens).

    The program runs in a background thread; an exception it raises is re-raised by
    the iteration. After the iteration, :attr:`state` is the final ProgramState.
    """

    _END = object()

    def __init__(self, program: Program, backend: Any, args: tuple, kwargs: dict) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._state = ProgramState(backend, sink=self._queue.put)
        self._error: BaseException | None = None
        self._done = False

        def target() -> None:
            try:
                program._execute(self._state, args, kwargs)
            except BaseException as exc:  # re-raised at the sync point (iteration)
                self._error = exc
            finally:
                self._queue.put(self._END)

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[str]:
        while not self._done:
            item = self._queue.get()
            if item is self._END:
                self._done = True
                break
            yield item
        self._thread.join()
        if self._error is not None:
            raise self._error

    @property
    def state(self) -> ProgramState:
        """The final state (waits for the program to end; raises its error)."""
        for _ in self:
            pass
        return self._state


def function(fn: Callable[..., Any]) -> Program:
    """Decorator: ``@structgen.function def prog(s, ...)`` makes a :class:`Program`.

    Raises:
        RequestError: the function takes no state argument, or uses a reserved
            argument name (``backend``, ``stream``, ``progress_bar``).
    """
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return Program(fn)
    params = list(sig.parameters)
    if not params:
        raise RequestError(f"{fn.__name__} must take the program state as its first argument")
    bad = [p for p in params[1:] if p in RESERVED]
    if bad:
        raise RequestError(f"{fn.__name__} uses the reserved argument name {bad[0]!r}")
    return Program(fn)


def _check_arguments(fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    """Check that ``fn(state, *args, **kwargs)`` binds, before the program runs.

    Raises:
        ProgramError: the arguments do not fit ``fn``'s parameters; the message names the
            program, what is wrong and the parameters it takes after the state, and
            ``filename`` / ``lineno`` point at the function's ``def`` (the line of the
            call is the caller's own traceback).
    """
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # no signature to check: the call itself will say
    try:
        sig.bind(None, *args, **kwargs)
    except TypeError as exc:
        rest = sig.replace(parameters=list(sig.parameters.values())[1:])
        takes = str(rest)[1:-1] or "nothing"  # "(q, *, k=1)" without its parentheses
        code = getattr(fn, "__code__", None)
        raise ProgramError(
            f"program {fn.__name__!r} cannot run with these arguments: {exc} (after the "
            f"state it takes: {takes})",
            filename=code.co_filename if code else "",
            lineno=code.co_firstlineno if code else 0,
            original=exc,
        ) from None


def _program_error(fn: Callable[..., Any], exc: BaseException) -> ProgramError:
    """A ProgramError naming the deepest line of ``fn``'s file in the traceback."""
    filename = fn.__code__.co_filename
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    frame = frames[-1] if frames else None
    where = f"{frame.filename}:{frame.lineno} in {frame.name}" if frame else fn.__name__
    line = f"\n    {frame.line}" if frame and frame.line else ""
    return ProgramError(
        f"program {fn.__name__!r} failed at {where}: {type(exc).__name__}: {exc}{line}",
        filename=frame.filename if frame else "",
        lineno=frame.lineno if frame else 0,
        original=exc,
    )


class TemplateProgram(Template):
    """A :class:`~structgen.lang.template.Template` that runs itself as a one-request program.

    Build it with :func:`template`. It is the same IR (``s += t`` appends it to a program);
    :meth:`run` fills it after a prompt on a backend.
    """

    def run(
        self,
        prompt: Any = "",
        backend: Any = None,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        token_healing: bool = True,
        copy_from: str | list[str] | None = None,
    ) -> TemplateResult:
        """Fill the template after ``prompt`` in one constrained request.

        Args:
            prompt: text, or a list of chat messages (the template then starts the
                assistant turn).
            backend: an Engine, or None for the default backend.
            max_tokens: budget of the whole fill.
            temperature: 0 (default) is greedy.
            token_healing: heal the boundary between the prompt and the template.
            copy_from: a source text (or texts): the ``str``, ``int``, ``float`` and
                ``regex`` holes are spans of it (:meth:`~Template.copy_from`); None: not.

        Returns:
            The typed values by hole name (``.text``: the filled template; ``.output``:
            the RequestOutput, with ``metrics``; ``.copied``: the holes copied;
            ``.truncated`` / ``.cut_by``: whether ``max_tokens`` or the end of the model's
            context cut the fill, and which, as ``ProgramState.cut_by`` tells).

        Raises:
            RequestError: the request failed or its output is incomplete; ``copy_from``
                is not a text or a non-empty list of texts, or has no span.
        """
        tpl = self if copy_from is None else self.copy_from(copy_from)
        state = ProgramState(as_backend(backend))
        body = E.TemplateFill(tpl, max_tokens, temperature, token_healing, result_name=_RESULT)
        if isinstance(prompt, (list, tuple)):
            for m in prompt:
                state += getattr(E, m["role"])(m["content"])
            state += E.assistant(body)
        else:
            state += E.Text(prompt) + body
        res = state[_RESULT]
        res.cut_by = state.cut_by(_RESULT)
        return res


_RESULT = "\x00template"


def template(source: str, max_chars: int = 200, **schemas: Any) -> TemplateProgram:
    """Compile a template with typed holes (syntax: ``structgen.lang.template``).

    Args:
        source: the template text.
        max_chars: most characters of a ``str`` hole.
        **schemas: JSON schemas / pydantic models for ``json`` holes, by name.

    Returns:
        The template, runnable with :meth:`TemplateProgram.run`.

    Raises:
        RequestError: malformed template (unbalanced braces, bad or duplicate hole).
        RegexError, SchemaError: a hole's regex or schema does not compile.
    """
    return TemplateProgram(source, max_chars=max_chars, **schemas)
