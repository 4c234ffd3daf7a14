"""Extract a pydantic model from free text with a structgen program.

Run: python examples/json_extraction.py
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

import structgen
from structgen import assistant, gen, system, user


class Person(BaseModel):
    name: str = Field(max_length=40)
    age: int = Field(ge=0, le=130)
    occupation: str = Field(max_length=30)
    city: str = Field(max_length=30)


@structgen.function
def extract_person(s, text):
    s += system(
        "You extract information from the user's text into JSON. Reply with one JSON object "
        "that follows this JSON Schema, using only facts stated in the text:\n"
        + json.dumps(Person.model_json_schema())
    )
    s += user(text)
    # copy_from: every string is a span of the text and every number one of its numerals
    # (README, "Copy constraints"), so the model cannot write an age the text does not hold
    s += assistant(gen("person", json_schema=Person, max_tokens=80, copy_from=text))


if __name__ == "__main__":
    state = extract_person.run(text="Maria Lopez, 34, works as a nurse in Lyon.")
    person = state["person"]
    print(person.model_dump_json())
