/* Integer tables shared by the grammar extensions (cfgrows.c: the grammar automaton's rows;
 * earley.c: the Earley charts): growable int32 vectors, zero-filled record arrays, a 64-bit
 * mixer, an open-addressing map of int32 triples -> int32 and a map of int32 sequences ->
 * int32 whose keys live in one pool. Include after Python.h (errors are set with
 * PyErr_NoMemory, -1 returned). */
#ifndef SG_INTMAPS_H
#define SG_INTMAPS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable int32 vectors -------------------------------------------------------- */

typedef struct {
    int32_t *d;
    Py_ssize_t n, cap;
} IVec;

static inline int ivec_reserve(IVec *v, Py_ssize_t extra) {
    if (v->n + extra <= v->cap)
        return 0;
    Py_ssize_t cap = v->cap ? v->cap : 64;
    while (cap < v->n + extra)
        cap *= 2;
    int32_t *d = realloc(v->d, (size_t)cap * sizeof(int32_t));
    if (d == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    v->d = d;
    v->cap = cap;
    return 0;
}

static inline int ivec_push(IVec *v, int32_t x) {
    if (ivec_reserve(v, 1) < 0)
        return -1;
    v->d[v->n++] = x;
    return 0;
}

/* grow a dense array of records to hold index n (zero-filled) */
static inline int grow(void **p, Py_ssize_t *cap, Py_ssize_t n, size_t size) {
    if (n < *cap)
        return 0;
    Py_ssize_t c = *cap ? *cap : 64;
    while (c <= n)
        c *= 2;
    char *q = realloc(*p, (size_t)c * size);
    if (q == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(q + (size_t)*cap * size, 0, (size_t)(c - *cap) * size);
    *p = q;
    *cap = c;
    return 0;
}

static inline uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* ---- map of int triples -> int32 (open addressing; a < 0 marks a free entry) ---------- */

typedef struct {
    int32_t a, b, c, v;
} E3;

typedef struct {
    E3 *e;
    size_t cap, n;
} Map3;

static inline size_t h3(int32_t a, int32_t b, int32_t c) {
    return (size_t)mix(((uint64_t)(uint32_t)a * 0x9e3779b97f4a7c15ULL) ^
                       ((uint64_t)(uint32_t)b << 21) ^ ((uint64_t)(uint32_t)c << 42) ^ (uint32_t)c);
}

static inline int32_t map3_get(const Map3 *m, int32_t a, int32_t b, int32_t c) {
    if (m->cap == 0)
        return -1;
    size_t mask = m->cap - 1;
    for (size_t i = h3(a, b, c) & mask;; i = (i + 1) & mask) {
        const E3 *e = &m->e[i];
        if (e->a < 0)
            return -1;
        if (e->a == a && e->b == b && e->c == c)
            return e->v;
    }
}

static inline int map3_put(Map3 *m, int32_t a, int32_t b, int32_t c, int32_t v) {
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        E3 *e = malloc(cap * sizeof(E3));
        if (e == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < cap; i++)
            e[i].a = -1;
        for (size_t j = 0; j < m->cap; j++) {
            if (m->e[j].a < 0)
                continue;
            size_t i = h3(m->e[j].a, m->e[j].b, m->e[j].c) & (cap - 1);
            while (e[i].a >= 0)
                i = (i + 1) & (cap - 1);
            e[i] = m->e[j];
        }
        free(m->e);
        m->e = e;
        m->cap = cap;
    }
    size_t mask = m->cap - 1;
    size_t i = h3(a, b, c) & mask;
    while (m->e[i].a >= 0)
        i = (i + 1) & mask;
    m->e[i] = (E3){a, b, c, v};
    m->n++;
    return 0;
}

/* ---- map of int32 sequences -> int32 (keys kept in a pool) -------------------------- */

typedef struct {
    uint64_t h;
    int32_t off, len, v, used;
} EV;

typedef struct {
    EV *e;
    size_t cap, n;
    IVec pool;
} MapV;

static inline uint64_t hseq(const int32_t *k, Py_ssize_t len) {
    uint64_t h = 0x243f6a8885a308d3ULL ^ (uint64_t)len;
    for (Py_ssize_t i = 0; i < len; i++)
        h = mix(h ^ ((uint64_t)(uint32_t)k[i] + 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1)));
    return h;
}

static inline int32_t mapv_get(const MapV *m, const int32_t *k, Py_ssize_t len, uint64_t h) {
    if (m->cap == 0)
        return INT32_MIN;
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const EV *e = &m->e[i];
        if (!e->used)
            return INT32_MIN;
        if (e->h == h && e->len == len && memcmp(m->pool.d + e->off, k, (size_t)len * 4) == 0)
            return e->v;
    }
}

static inline int mapv_put(MapV *m, const int32_t *k, Py_ssize_t len, uint64_t h, int32_t v) {
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        EV *e = calloc(cap, sizeof(EV));
        if (e == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t j = 0; j < m->cap; j++) {
            if (!m->e[j].used)
                continue;
            size_t i = m->e[j].h & (cap - 1);
            while (e[i].used)
                i = (i + 1) & (cap - 1);
            e[i] = m->e[j];
        }
        free(m->e);
        m->e = e;
        m->cap = cap;
    }
    if (ivec_reserve(&m->pool, len) < 0)
        return -1;
    int32_t off = (int32_t)m->pool.n;
    memcpy(m->pool.d + off, k, (size_t)len * 4);
    m->pool.n += len;
    size_t mask = m->cap - 1;
    size_t i = h & mask;
    while (m->e[i].used)
        i = (i + 1) & mask;
    m->e[i] = (EV){h, off, (int32_t)len, v, 1};
    m->n++;
    return 0;
}

#endif /* SG_INTMAPS_H */
