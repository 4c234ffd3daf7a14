"""Contact-card copy grammars over a real vocabulary: the batched-extraction benchmark's cards
(``benchmarks/bench_extract_batch.documents``) under a contact-card schema's copy constraint,
for tests of the matcher paths extraction takes on them."""

from __future__ import annotations

from collections.abc import Iterator

from structgen.fsm.index.vocabulary import Vocabulary

CONTACT_CARD_SCHEMA = {
    "type": "object",
    "properties": {
        "full_name": {"type": "string", "maxLength": 80},
        "email": {"type": "string", "format": "email", "maxLength": 80},
        "phone": {"type": "string", "maxLength": 30},
        "job_title": {"type": ["string", "null"], "maxLength": 80},
    },
    "required": ["full_name", "email", "phone"],
    "additionalProperties": False,
}


def contact_card_grammars(vocab: Vocabulary, n: int, seed: int) -> Iterator:
    """The compiled copy grammars (``structgen.fsm.compiler`` grammars) of ``n`` seeded cards."""
    from benchmarks.bench_extract_batch import documents
    from structgen.extraction.copy import copy_constraint
    from structgen.fsm.compiler import compile_spec

    for text in documents(n, seed=seed):
        yield compile_spec(copy_constraint(CONTACT_CARD_SCHEMA, text).spec, vocab)
