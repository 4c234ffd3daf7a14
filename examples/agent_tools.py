"""A small tool-using agent: the model picks a tool, writes its arguments under the tool's
JSON schema, the program calls the Python function and feeds the result back.

The program shows the mechanics: every call's arguments fit the tool's schema and every
printed result is what the function returned. The answer is the model's: the packaged
SmolLM2-135M calls ``add {'a': 1, 'b': 2}`` for this task, so pass a larger model
(``structgen.set_default_backend(structgen.Engine(PATH))``) for a right one.

Run: python examples/agent_tools.py
"""

from __future__ import annotations

import structgen
from structgen import assistant, gen, select, user


def add(a: int, b: int) -> int:
    return a + b


def multiply(a: int, b: int) -> int:
    return a * b


NUMS = {"type": "integer", "minimum": -1000, "maximum": 1000}
TOOLS = {
    "add": (add, {"type": "object", "properties": {"a": NUMS, "b": NUMS}, "required": ["a", "b"]}),
    "multiply": (
        multiply,
        {"type": "object", "properties": {"a": NUMS, "b": NUMS}, "required": ["a", "b"]},
    ),
    "finish": (None, None),
}


@structgen.function
def agent(s, task, max_steps=3):
    s += user(f"Task: {task}\nTools: add(a, b), multiply(a, b), finish. Use one tool per step.")
    for step in range(max_steps):
        s += assistant("Tool: " + select(f"tool_{step}", list(TOOLS)))
        fn, schema = TOOLS[s[f"tool_{step}"]]
        if fn is None:
            break
        s += user("Arguments as JSON:")
        s += assistant(gen(f"args_{step}", json_schema=schema, max_tokens=30))
        result = fn(**s[f"args_{step}"])
        s.set(f"result_{step}", result)
        s += user(f"Result: {result}. Next tool?")


if __name__ == "__main__":
    st = agent.run(task="Compute (3 + 4) * 5.")
    for step in range(3):
        if f"tool_{step}" not in st:
            break
        print(step, st[f"tool_{step}"], st.get(f"args_{step}"), st.get(f"result_{step}"))
