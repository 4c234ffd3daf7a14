"""Schema-driven extraction: text in, schema-valid object out (the CLI's main job).

Above the runtime and the grammar layer: it builds the prompt (``prompt.py``), compiles
the schema's spec (``structgen.fsm.spec.JsonSchema``) and generates with any engine that
has ``vocab``, ``make_request`` and ``run_requests`` (``extractor.py``); ``result.py``
holds ``ExtractionResult``; ``copy.py``, ``spans.py``, ``choices.py``, ``evidence/`` and
``items.py`` (array items the text does not support, dropped) refine what greedy writes.
``Engine.extract`` calls :func:`extract`.
"""

from __future__ import annotations

from structgen.extraction.extractor import DEFAULT_EXTRACT_MAX_TOKENS, extract
from structgen.extraction.prompt import extraction_messages
from structgen.extraction.result import ExtractionResult

__all__ = ["extract", "extraction_messages", "DEFAULT_EXTRACT_MAX_TOKENS", "ExtractionResult"]
