/* The tokenizer of structgen's regex lowering (csrc/regexlower.c): the _TOKEN regex of
 * structgen/fsm/regex/lower.py read by hand, token for token, and the group matching of its
 * _match_groups. A text no token covers end to end, with unbalanced parentheses or nested
 * deeper than max_nesting is left to re's parser (scan returns 0), as in Python.
 *
 * Token kinds are _TOKEN's group numbers: escape 1, class 3, "(" or "(?:" 4, ")" 5, "|" 6,
 * quantifier 12 (with its counts; lo -2 / hi -2 for a count at or past re's MAXREPEAT),
 * "." 13, literal run 14.
 */
#ifndef SG_REGEX_TOKENS_H
#define SG_REGEX_TOKENS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

enum { TK_ESCAPE = 1, TK_CLASS = 3, TK_OPEN = 4, TK_CLOSE = 5, TK_ALT = 6, TK_QUANT = 12,
       TK_ANY = 13, TK_LITERAL = 14 };
#define MAXREPEAT 4294967295LL
#define INF (-1)  /* no upper bound */

typedef struct {
    int kind;
    Py_ssize_t start, end;  /* span in the text */
    long long lo, hi;       /* quantifier counts (TK_QUANT) */
} Token;


static int is_hex(Py_UCS4 c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static int is_alnum_ascii(Py_UCS4 c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static int is_literal_char(Py_UCS4 c) {
    return !(c == '\\' || c == '[' || c == '(' || c == ')' || c == '|' || c == '*' || c == '+'
             || c == '?' || c == '{' || c == '.' || c == '^' || c == '$');
}

/* digits [0-9]+ from *pos; -1 if none, -2 if the count reaches MAXREPEAT (re's error) */
static long long read_count(int kind, const void *data, Py_ssize_t n, Py_ssize_t *pos) {
    Py_ssize_t p = *pos;
    long long v = 0;
    int any = 0, big = 0;
    while (p < n) {
        Py_UCS4 c = PyUnicode_READ(kind, data, p);
        if (c < '0' || c > '9')
            break;
        if (!big) {
            v = v * 10 + (c - '0');
            if (v >= MAXREPEAT)
                big = 1;
        }
        any = 1;
        p++;
    }
    *pos = p;
    return !any ? -1 : (big ? -2 : v);
}

/* One token at pos; returns 0 when none matches there (the caller returns None). */
static int next_token(int kind, const void *data, Py_ssize_t n, Py_ssize_t pos, Token *tok) {
    Py_UCS4 c = PyUnicode_READ(kind, data, pos);
    Py_ssize_t p = pos + 1;
    tok->start = pos;
    if (c == '\\') {
        if (p >= n)
            return 0;
        Py_UCS4 e = PyUnicode_READ(kind, data, p);
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits) {
            for (int k = 1; k <= digits; k++)
                if (p + k >= n || !is_hex(PyUnicode_READ(kind, data, p + k)))
                    return 0;
            p += 1 + digits;
        } else if (!is_alnum_ascii(e) || strchr("tnrfvadDwWsS", (int)e) != NULL) {
            p += 1;
        } else {
            return 0;
        }
        tok->kind = TK_ESCAPE;
    } else if (c == '[') {
        Py_ssize_t lead = -1;  /* a ']' first in the body: its position */
        if (p < n && PyUnicode_READ(kind, data, p) == '^')
            p++;
        if (p < n && PyUnicode_READ(kind, data, p) == ']')
            lead = p++;
        for (;;) {
            Py_UCS4 d = p < n ? PyUnicode_READ(kind, data, p) : '[';
            if (d == ']')
                break;
            if (d == '[' || (d == '\\' && p + 1 >= n)) {
                if (lead < 0)
                    return 0;
                p = lead;  /* re backtracks: that ']' closes an empty class (parsed, refused) */
                break;
            }
            p += d == '\\' ? 2 : 1;
        }
        p++;  /* the closing ] */
        tok->kind = TK_CLASS;
    } else if (c == '(') {
        if (p + 1 < n && PyUnicode_READ(kind, data, p) == '?' && PyUnicode_READ(kind, data, p + 1) == ':')
            p += 2;
        tok->kind = TK_OPEN;
    } else if (c == ')') {
        tok->kind = TK_CLOSE;
    } else if (c == '|') {
        tok->kind = TK_ALT;
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (c == '{') {
            long long lo = read_count(kind, data, n, &p), hi;
            if (lo == -1) {  /* {,n} */
                if (p >= n || PyUnicode_READ(kind, data, p) != ',')
                    return 0;
                p++;
                hi = read_count(kind, data, n, &p);
                if (hi == -1)
                    return 0;
                lo = 0;
            } else if (p < n && PyUnicode_READ(kind, data, p) == ',') {
                p++;
                hi = read_count(kind, data, n, &p);
                if (hi == -1)
                    hi = INF;
            } else {
                hi = lo;
            }
            if (p >= n || PyUnicode_READ(kind, data, p) != '}')
                return 0;
            p++;
            tok->lo = lo;
            tok->hi = hi;
        } else {
            tok->lo = c == '+' ? 1 : 0;
            tok->hi = c == '?' ? 1 : INF;
        }
        if (p < n && PyUnicode_READ(kind, data, p) == '?')
            p++;  /* lazy: same language */
        tok->kind = TK_QUANT;
    } else if (c == '.') {
        tok->kind = TK_ANY;
    } else if (is_literal_char(c)) {
        while (p < n && is_literal_char(PyUnicode_READ(kind, data, p)))
            p++;
        tok->kind = TK_LITERAL;
    } else {
        return 0;
    }
    tok->end = p;
    return 1;
}

/* Tokenize and match groups; 0 for a bail (syntax left to re), -1 on error, 1 on success. */
static int scan(PyObject *text, Py_ssize_t max_nesting, Token **toks_out, Py_ssize_t **close_out,
                Py_ssize_t *n_out) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    Token *toks = PyMem_Malloc(sizeof(Token) * (len + 1));
    Py_ssize_t *close = PyMem_Malloc(sizeof(Py_ssize_t) * (len + 1));
    Py_ssize_t *stack = PyMem_Malloc(sizeof(Py_ssize_t) * (len + 1));
    int ok = 1;
    if (toks == NULL || close == NULL || stack == NULL) {
        PyErr_NoMemory();
        ok = -1;
    }
    Py_ssize_t n = 0, depth = 0, pos = 0;
    while (ok == 1 && pos < len) {
        if (!next_token(kind, data, len, pos, &toks[n])) {
            ok = 0;
            break;
        }
        if (toks[n].kind == TK_OPEN) {
            stack[depth++] = n;
            if (depth > max_nesting)
                ok = 0;
        } else if (toks[n].kind == TK_CLOSE) {
            if (depth == 0)
                ok = 0;
            else
                close[stack[--depth]] = n;
        }
        pos = toks[n++].end;
    }
    if (depth != 0)
        ok = ok == -1 ? -1 : 0;
    PyMem_Free(stack);
    if (ok != 1) {
        PyMem_Free(toks);
        PyMem_Free(close);
        return ok;
    }
    *toks_out = toks;
    *close_out = close;
    *n_out = n;
    return 1;
}

#endif
