"""Grammars shared by the grammar tests (Lark ones are also read by the ``lark`` package)."""

from __future__ import annotations

ARITHMETIC = r"""
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: atom | product "*" atom | product "/" atom
?atom: INT | "-" atom | "(" sum ")"
%import common.INT
%import common.WS_INLINE
%ignore WS_INLINE
"""

NESTED_LISTS = r"""
start: value
value: list | WORD | ESCAPED_STRING | SIGNED_NUMBER
list: "[" [value ("," value)*] "]"
%import common (WORD, ESCAPED_STRING, SIGNED_NUMBER, WS)
%ignore WS
"""

LEFT_RECURSIVE = r"""
start: a
a: a "x" | b
b: "y" b |
"""

STATEMENTS = r"""
start: stmt+
stmt: CNAME "=" expr ";" | "if" "(" expr ")" block ["else" block] | block
block: "{" stmt* "}"
expr: expr OP term | term
term: CNAME | INT | "(" expr ")"
OP: "+" | "-" | "<" | "=="
%import common (CNAME, INT, WS)
%ignore WS
"""

BALANCED = r"""
start: group*
group: "(" group* ")" | "[" group* "]" | "{" group ~ 0..2 "}"
"""

# right recursion: runs of prefix operators and right-recursive lists (Leo's chains in
# ``earley.py``), a chain that changes nonterminal (``"!" f``: not merged), and two items
# waiting on one nonterminal (``"+" g`` / ``"+" g "!"``: not merged either)
RIGHT_RECURSIVE = r"""
start: e
?e: "-" e | "!" f | "+" g | atom
?f: "-" e | "~" f | atom
?g: "+" g | "+" g "!" | atom
?atom: INT | "(" e ")" | "[" list "]"
list: e | e "," list
%import common.INT
%ignore " "
"""

LARK_GRAMMARS = {
    "arithmetic": ARITHMETIC,
    "nested_lists": NESTED_LISTS,
    "left_recursive": LEFT_RECURSIVE,
    "statements": STATEMENTS,
    "balanced": BALANCED,
    "right_recursive": RIGHT_RECURSIVE,
}

# JSON (RFC 8259) in GBNF, as llama.cpp's json.gbnf writes it, made exact
JSON_GBNF = r"""
root   ::= ws value ws
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* ws )? "}"
array  ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n\r]*   # optional whitespace
"""

# the same language in XGrammar's EBNF (with a /* */ comment)
JSON_EBNF = JSON_GBNF.replace("# optional whitespace", "/* optional whitespace */")
