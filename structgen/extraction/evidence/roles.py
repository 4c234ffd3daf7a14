"""The role rule of ``structgen.extraction.evidence``: two sibling string fields whose
names differ by a role word (``home_team`` / ``away_team``, ``sender_name`` /
``recipient_name``) and whose values the model swapped, by the role words the text writes
next to the values ("Home: Tampere Lynx", "Cardiff Wildcats (home)").
A field named by one role noun takes the name the text writes beside that noun
("lead photographer Daniel Okafor": ``role_name``).
"""

from __future__ import annotations

import re
from typing import Any

from structgen.extraction.evidence.fields import free_string_schema, schema_accepts
from structgen.extraction.evidence.names import is_name_word
from structgen.extraction.evidence.text import TextWords, name_stems, stem, stems_match

# a role word as a label before a value ("Home: ") and in brackets after it (" (home)")
_LABEL_GAP = re.compile(r"[ \t]*:[ \t]*")
_BRACKET_GAP = re.compile(r"[ \t]*[(\[][ \t]*")
_ARTICLES = frozenset(("the", "a", "an"))  # "(the company)": the role word after it
# a role word, one of these and the value: "discharging at Antwerp", "loading in Santos"
_PLACE_PREPOSITIONS = frozenset(("at", "in", "from", "into"))
_BRACKET_END = re.compile(r"[ \t]*[)\]]")  # the role word alone in its brackets


def swapped_roles(root: Any, sub: dict, node: dict, doc: TextWords) -> dict[str, str]:
    """The role rule of the package docstring: ``{field: new value}`` for each pair of
    free string fields of one object (schema order) whose names' stems differ (each has
    a stem the other lacks: its role) and whose values, both written in the text, the
    text marks the other way round: a role stem of the other field labels a value (the
    word right before it, then ``:``: "Home: Tampere Lynx"; or before ``at``, ``in``,
    ``from`` or ``into`` and the value, the word's stem the role's own: "discharging at
    Antwerp", not "membership at" for ``member``) or follows it alone in
    brackets, after an article or not ("Cardiff Wildcats (home)", "HireHub Tools Ltd (the
    company)"; not "Mei Tanaka (card no. LB-440918)"), and no
    value is marked with its own field's role. The two values are exchanged; a pair the
    text does not mark, or marks both ways, is left.
    """
    names = [
        k
        for k, p in (sub.get("properties") or {}).items()
        if free_string_schema(root, p) is not None and isinstance(node.get(k), str) and node[k]
    ]
    found: dict[str, str] = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if a in found or b in found or node[a] == node[b]:
                continue
            sa, sb = name_stems(a), name_stems(b)
            role_a = [s for s in sa if not any(stems_match(s, t) for t in sb)]
            role_b = [s for s in sb if not any(stems_match(s, t) for t in sa)]
            if not role_a or not role_b:
                continue
            va, vb = node[a], node[b]
            own = _marked(doc, va, role_a) or _marked(doc, vb, role_b)
            other = _marked(doc, va, role_b) or _marked(doc, vb, role_a)
            if other and not own:
                found[a], found[b] = vb, va
    return found


def _marked(doc: TextWords, value: str, roles: list[str]) -> bool:
    """Whether the text writes ``value`` with a word of ``roles`` (stems) as its label or
    alone in brackets right after it, at one of its occurrences (``swapped_roles``).
    """
    text, words = doc.text, doc.words
    start = text.find(value)
    while start >= 0:
        end = start + len(value)
        first, last = doc.word_at(start), doc.word_at(end - 1)
        near = []
        if first > 0 and _LABEL_GAP.fullmatch(text[words[first - 1][2] : start]):
            near.append(first - 1)
        role = last + 1
        if role + 1 < len(words) and doc.raw[role] in _ARTICLES:
            role += 1  # "HireHub Tools Ltd (the company)"
        if (
            role < len(words)
            and _BRACKET_GAP.fullmatch(text[end : words[last + 1][1]])
            and (role == last + 1 or text[words[last + 1][2] : words[role][1]].strip() == "")
            and _BRACKET_END.match(text, words[role][2])
        ):
            near.append(role)  # "(home)"; not "Mei Tanaka (card no. LB-440918)"
        if any(stems_match(words[k][0], r) for k in near for r in roles):
            return True
        if (
            first > 1
            and doc.raw[first - 1] in _PLACE_PREPOSITIONS
            and text[words[first - 2][2] : start].split() == [doc.raw[first - 1]]
            and words[first - 2][0] in roles
        ):
            return True  # "discharging at Antwerp"; the stem itself, not "membership at"
        start = text.find(value, start + 1)
    return False


# a text word, as the role-noun rule reads names and role nouns
_TEXT_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_APPOSITIVE_END = re.compile(r"[ \t]*(?:[),.;\n]|\Z)")  # "Haas, Registrar)" / ", Registrar."


def role_name(root: Any, sub: dict, name: str, node: dict, text: str) -> str | None:
    """The role-noun rule of the package docstring: for a free string field named by one
    role noun of four letters or more and nothing else (``photographer``, ``registrar``,
    ``conductor_name``: the word ``name`` does not count; not ``student_id``), the one
    name the text writes right after that noun written in lowercase ("lead photographer
    Daniel Okafor"; "Brightwell Pest Solutions" is a name, not ``pest``'s) or as
    the name's appositive, the noun ending its clause ("Dr. Friederike Haas, Registrar)"):
    two or three capitalised name words (``names.is_name_word``) with one space between;
    where the model left the field null or out, or holds a string that neither holds that
    name nor lies inside it. Returns the name, or None (no change: none or two names, a
    schema that refuses it; a name in brackets after the noun, "a second photographer (Ana
    Ruiz)", is none).
    """
    props = sub.get("properties") or {}
    branch = free_string_schema(root, props.get(name))
    current = node.get(name)
    words = [w for w in re.split(r"[\W_]+", name.lower()) if w and w != "name"]
    if branch is None or current is not None and not isinstance(current, str):
        return None
    if len(words) != 1 or len(words[0]) < 4 or not words[0].isalpha():
        return None
    stems = [stem(words[0])]
    if stems[0] not in text.lower():
        return None  # no word of the text can have that stem
    tokens = list(_TEXT_WORD.finditer(text))
    found: set[str] = set()
    for i, w in enumerate(tokens):
        if stem(w.group()) != stems[0]:
            continue
        after = _joined_run(text, tokens[i + 1 : i + 4], w.end())
        if len(after) >= 2 and w.group().islower():  # "photographer Daniel Okafor"
            found.add(" ".join(after))
        if i >= 2 and text[tokens[i - 1].end() : w.start()] == ", ":
            if _APPOSITIVE_END.match(text, w.end()):
                before = _joined_run(text, tokens[max(0, i - 3) : i][::-1], None)
                if len(before) >= 2:  # "Friederike Haas, Registrar)"
                    found.add(" ".join(before[::-1]))
    if len(found) != 1:
        return None
    (new,) = found
    if isinstance(current, str):
        folded, new_folded = " ".join(current.casefold().split()), new.casefold()
        if new_folded in folded or folded and folded in new_folded:
            return None
    return new if schema_accepts(root, branch, new) else None


def _joined_run(text: str, words: list[re.Match], start: int | None) -> list[str]:
    """The name words (``names.is_name_word``) of ``words`` in order, each one space from
    the last (``start``: where the first must follow after one space; None: ``words`` run
    backwards from a name's last word), up to the first that is no name word.
    """
    run: list[str] = []
    edge = start
    for w in words:
        if not is_name_word(w.group()):
            break
        if edge is not None and (
            text[edge : w.start()] != " " if start is not None else text[w.end() : edge] != " "
        ):
            break
        run.append(w.group())
        edge = w.end() if start is not None else w.start()
    return run
