"""Classify texts with select: the label with the highest mean token log-probability wins.

Run: python examples/classify.py
"""

from __future__ import annotations

import structgen
from structgen import assistant, select, user

LABELS = ["positive", "negative"]


@structgen.function
def classify(s, review):
    s += user(f"Is this review positive or negative?\nReview: {review}")
    s += assistant("Sentiment: " + select("label", LABELS))


if __name__ == "__main__":
    reviews = [
        "I loved it, wonderful food and friendly staff!",
        "Terrible service, cold food, never again.",
    ]
    states = classify.run_batch([{"review": r} for r in reviews], progress_bar=True)
    for review, st in zip(reviews, states):
        scores = st.select_scores("label")
        print(f"{st['label']}\t{scores['positive']:.3f}/{scores['negative']:.3f}\t{review}")
