"""The regex stage of the grammar pipeline: regex text -> lazily built byte DFA.

Modules, in pipeline order:

* ``anchors``: end anchors of a whole-output pattern removed (no-ops), others located;
* ``parse``: the adapter over CPython's regex parser (vetting, lowering of the parse tree);
* ``lower``: the one-pass lowering of plain regex text (its token loop in C,
  ``csrc/regexlower.c`` -> ``_regexlower``; the Python loop is the fallback);
* ``recipes``: terms carried across arenas (kept between compiles);
* ``utf8``: code-point ranges -> UTF-8 byte-range sequences;
* ``terms``: the hash-consed byte-level terms and their derivatives (``TermArena``; the
  derivatives and fronts of plain terms in C, ``csrc/regex_derive.h`` in ``_regexlower``);
* ``lazy_dfa``: the byte DFA whose states are derivatives, built on demand (``ByteDFA``; a
  whole row in one C call, ``fill_row``, where the arena holds no intersection or complement);
* ``dfa``: the entry point, ``regex_to_dfa``;
* ``definitions``: shared definitions referred to by placeholder code points;
* ``escape``: literal text written as regex syntax (``escape_literal``).
"""
