"""An engine's grammar vocabulary prepared on a background thread (``VocabularyPreparation``).

``Engine()`` needs neither ``Vocabulary.prepare``'s tables nor the grammar compiler's
modules (which its warm-up imports) to load a model or to serve unconstrained requests:
only a grammar's compile and masks read them. So ``Vocabulary.prepare`` runs on a
background thread started once the vocabulary is read, and the engine's ``vocab`` joins it
(the first constrained request, or anything else that reads ``vocab``, waits for what is
left of it). The thread is not a daemon: a process that ends right after ``Engine()`` waits
for it at shutdown (killed inside the compiler's native code, a daemon thread aborted the
process: "terminate called without an active exception", exit -6).
"""

from __future__ import annotations

import threading

from structgen.fsm.index.vocabulary import Vocabulary

__all__ = ["VocabularyPreparation"]


class VocabularyPreparation:
    """``vocab.prepare()`` on a background (non-daemon) thread, started here; :meth:`result`
    joins it, and so does the interpreter's shutdown.

    Thread safety: ``result`` may be called from any thread, any number of times. Until it
    returns, nothing else should read the vocabulary's prepared tables (the engine hands its
    vocabulary out only through ``result``).

    Args:
        vocab: the vocabulary to prepare.

    Raises: never (what ``prepare`` raises is raised by :meth:`result`).
    """

    def __init__(self, vocab: Vocabulary) -> None:
        self._vocab = vocab
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name="structgen-vocab-prepare", daemon=False
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            self._vocab.prepare()
        except BaseException as exc:  # surfaced by result(), on the caller's thread
            self._error = exc

    def result(self) -> Vocabulary:
        """The prepared vocabulary, once the thread is done (waits for it).

        Raises:
            Whatever ``Vocabulary.prepare`` raised (the same exception object at every call;
            the vocabulary is not handed out half prepared).
        """
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._vocab

    def done(self) -> bool:
        """Whether the preparation finished (successfully or not). Raises: never."""
        return not self._thread.is_alive()
