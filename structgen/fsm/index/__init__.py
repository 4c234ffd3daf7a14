"""The index stage of the grammar pipeline: a byte DFA meets one vocabulary.

Modules:

* ``vocabulary``: the model's tokens as bytes (``Vocabulary``) and its token trie;
* ``trie``: the token trie and its walk of a DFA state (in C where built,
  ``csrc/tokentrie.c`` -> ``_tokentrie``; numpy fallback);
* ``token_index``: per-state token masks and next states, cached (``TokenIndex``);
* ``token_ends``: where a byte string can sit inside the tokens (``TokenEnds``: what the
  grammar automaton's node-free masks ask);
* ``masks``: writing packed mask rows into a batch bitmask;
* ``budget``: the completion budget, the tokens a grammar still needs to finish.
"""
