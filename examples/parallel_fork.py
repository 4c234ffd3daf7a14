"""Fork: sample several answers in one batch (sharing the prompt's KV), then pick one.

Each answer ends at its first newline or after ``max_tokens=8`` tokens, so with the packaged
SmolLM2-135M some read as unfinished phrases (``Hobby: Caramel and C``).

Run: python examples/parallel_fork.py
"""

from __future__ import annotations

import structgen
from structgen import assistant, gen, select, user


@structgen.function
def brainstorm(s, topic, n=3):
    s += user(f"Give one short name for a {topic}.")
    forks = s.fork(n)
    # the same expression on every branch, run together in one batch; branch k samples
    # with seed 0 + k, so the answers differ and the run is reproducible
    forks += assistant(gen("idea", max_tokens=8, temperature=0.8, seed=0, stop="\n"))
    s.join(forks)
    ideas = [i.strip() or "?" for i in s["idea"]]
    listing = "\n".join(f"{k + 1}. {idea}" for k, idea in enumerate(ideas))
    s += user(f"Which name is best?\n{listing}\nAnswer with the number.")
    s += assistant(select("best", [str(k + 1) for k in range(n)]))


if __name__ == "__main__":
    st = brainstorm.run(topic="coffee shop")
    for k, idea in enumerate(st["idea"]):
        print(f"{k + 1}. {idea.strip()}")
    print("best:", st["best"])
