"""Extract a typed record from free text with a pydantic model, on the packaged SmolLM2.

Run: python examples/extract_person.py
"""

from __future__ import annotations

from pydantic import BaseModel, Field

import structgen


class Person(BaseModel):
    """The record to fill from the text."""

    name: str = Field(max_length=80)
    age: int = Field(ge=0, le=150)
    occupation: str = Field(max_length=60)
    city: str = Field(max_length=60)


def main() -> None:
    """Load the default model once and extract two people in one batch."""
    engine = structgen.Engine()
    texts = [
        "Maria Lopez, 34, works as a nurse in Lyon.",
        "Our new colleague is Kenji Watanabe; he is 51 and teaches physics in Osaka.",
    ]
    for person in engine.extract(Person, texts):
        print(person.model_dump_json())


if __name__ == "__main__":
    main()
