"""The range rule (``evidence.numbers.range_values``) on a ``low`` / ``high`` pair and
signed numerals ("between minus six and minus one"), against hand-checked values."""

from __future__ import annotations

import pytest

from structgen.extraction.evidence import apply_evidence

WEATHER = {
    "type": "object",
    "properties": {
        "high_c": {"type": "number", "minimum": -60, "maximum": 60},
        "low_c": {"type": "number", "minimum": -60, "maximum": 60},
        "wind_kmh": {"type": ["number", "null"], "minimum": 0},
    },
    "required": ["high_c", "low_c", "wind_kmh"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # the model wrote the range's ends in text order: the low end is the low field's
        ("Snow, temperatures between minus six and minus one degrees, wind 20 km/h.",
         (-6, -1), (-1, -6)),
        ("Mild, 4 to 9 °C today, wind 20 km/h.", (4, 4), (9, 4)),
        ("Clear, minus 3 to 2 °C, wind 20 km/h.", (-3, 2), (2, -3)),
        # no range written: the model's values stay
        ("Highs of 7 °C and lows of 3 °C, wind 20 km/h.", (7, 3), (7, 3)),
        ("High minus one, low minus six, wind 20 km/h.", (-1, -6), (-1, -6)),
        # two ranges: the model decides
        ("1 to 4 °C on Monday, 2 to 6 °C on Tuesday, wind 20 km/h.", (4, 1), (4, 1)),
    ],
)  # fmt: skip
def test_a_low_high_pair_takes_the_one_range(text, before, after):
    value = {"high_c": before[0], "low_c": before[1], "wind_kmh": 20}
    new, _ = apply_evidence(WEATHER, text, value)
    assert (new["high_c"], new["low_c"]) == after
