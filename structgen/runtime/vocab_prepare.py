"""An engine's start-up work for grammars, on background threads (``VocabularyPreparation``).

``Engine()`` needs neither the grammar compiler's modules nor ``Vocabulary.prepare``'s
tables to load a model or to serve unconstrained requests: only a grammar's compile and
masks read them. So the compiler's imports start on a thread when ``Engine()`` starts
(beside the model's load, whose file reads, numpy copies and torch ops release the GIL),
and ``Vocabulary.prepare`` runs on a thread once the vocabulary is read; the engine's
``vocab`` joins it (the first constrained request, compile or stop string waits for what is
left of it, never for less than the whole preparation).
"""

from __future__ import annotations

import threading

from structgen.fsm.index.vocabulary import Vocabulary

__all__ = ["VocabularyPreparation", "COMPILER_MODULES"]

# what ``Vocabulary.prepare``'s warm-up imports (the compiler, the JSON Schema converter
# with jsonschema, the grammar layer), in import order
COMPILER_MODULES = (
    "structgen.fsm.compiler",
    "structgen.fsm.json_schema.objects",
    "structgen.fsm.json_schema.pattern",
    "structgen.fsm.grammar.schema_rules",
)


def _import_compiler() -> None:
    import importlib

    for name in COMPILER_MODULES:
        importlib.import_module(name)


class VocabularyPreparation:
    """``Vocabulary.prepare()`` of an engine's vocabulary, on a daemon thread.

    Made with :meth:`start_imports` when the engine's start-up begins (the compiler's
    modules imported on a thread), then :meth:`prepare` once the vocabulary is read; the
    preparation thread waits for the imports, then prepares. :meth:`result` joins it.

    Thread safety: ``result`` may be called from any thread, any number of times. Until it
    returns, nothing else should read the vocabulary's prepared tables (the engine hands its
    vocabulary out only through ``result``).
    """

    def __init__(self) -> None:
        self._imports: threading.Thread | None = None
        self._thread: threading.Thread | None = None
        self._vocab: Vocabulary | None = None
        self._error: BaseException | None = None

    @classmethod
    def start_imports(cls) -> VocabularyPreparation:
        """A preparation whose compiler imports (``COMPILER_MODULES``) start now on a
        daemon thread; an import error is raised by :meth:`result`. Raises: never.
        """
        prep = cls()
        prep._imports = threading.Thread(
            target=prep._guarded, args=(_import_compiler,), name="structgen-compiler-imports",
            daemon=True,
        )  # fmt: skip
        prep._imports.start()
        return prep

    def prepare(self, vocab: Vocabulary) -> None:
        """Start ``vocab.prepare()`` on a daemon thread (after the imports, if started).

        Raises:
            RuntimeError: called twice.
        """
        if self._thread is not None:
            raise RuntimeError("VocabularyPreparation.prepare called twice")
        self._vocab = vocab
        self._thread = threading.Thread(
            target=self._guarded, args=(self._run,), name="structgen-vocab-prepare", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        if self._imports is not None:
            self._imports.join()
        if self._error is None:
            self._vocab.prepare()

    def _guarded(self, work) -> None:
        try:
            work()
        except BaseException as exc:  # surfaced by result(), on the caller's thread
            if self._error is None:
                self._error = exc

    def result(self) -> Vocabulary:
        """The prepared vocabulary, once the thread is done (waits for it).

        Raises:
            RuntimeError: :meth:`prepare` was not called.
            Whatever the imports or ``Vocabulary.prepare`` raised (the same exception
            object at every call; the vocabulary is not handed out half prepared).
        """
        if self._thread is None:
            raise RuntimeError("VocabularyPreparation.result before prepare")
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._vocab

    def done(self) -> bool:
        """Whether the preparation finished (successfully or not). Raises: never."""
        return self._thread is not None and not self._thread.is_alive()
