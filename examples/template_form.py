"""Fill a form with typed holes: one request, fixed text jump-forwarded.

Run: python examples/template_form.py
"""

from __future__ import annotations

import structgen

FORM = structgen.template(
    "Name: {name}\nAge: {age:int}\nJob: {job}\nCity: {city:regex=[A-Z][a-z]+}\n"
    "Employed: {employed:bool}\n",
    max_chars=40,
)

if __name__ == "__main__":
    text = "Maria Lopez, 34, works as a nurse in Lyon."
    values = FORM.run(prompt=[{"role": "user", "content": f"Fill in the form for: {text}"}])
    print(dict(values))
    m = values.output.metrics
    print(f"generated {m.num_generated_tokens} tokens in {m.num_forward_passes} forward passes")
