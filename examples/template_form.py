"""Fill a form with typed holes: one request, fixed text jump-forwarded.

``copy_from=text`` copies the ``str``, ``int``, ``float`` and ``regex`` holes from the
text: each is a span of it (whole words) that fits the hole, so the model cannot invent an
age or a city (without it, the packaged SmolLM2 writes ``Age: 28`` and ``City: Spain``); the
``bool`` hole is chosen freely. A span's ends are chosen greedily, token by token, so a
plain ``{name}`` hole runs on past the name (``Maria Lopez, 34, works as a nurse in``), and
one of capitalised words may stop after the first (``Maria``): the name hole here is a regex
of a first and a last name, so the copied span is the whole name (``Maria Lopez``).

Run: python examples/template_form.py
"""

from __future__ import annotations

import structgen

FORM = structgen.template(
    "Name: {name:regex=[A-Z][a-z]+ [A-Z][a-z]+}\nAge: {age:int}\n"
    "City: {city:regex=[A-Z][a-z]+}\nWorks: {employed:bool}\n",
    max_chars=40,
)

if __name__ == "__main__":
    text = "Maria Lopez, 34, works as a nurse in Lyon."
    values = FORM.run(prompt=text + "\n", copy_from=text)
    print(dict(values), "copied:", ", ".join(values.copied))
    m = values.output.metrics
    print(f"generated {m.num_generated_tokens} tokens in {m.num_forward_passes} forward passes")
