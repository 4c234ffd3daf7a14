/* The Earley charts' scan as a C call (csrc/earley.c exports it, csrc/cfgrows.c calls it), so
 * the grammar automaton's row builder reaches the chart node after a lexeme without entering
 * the interpreter. Exported as the capsule structgen.fsm.grammar._earley._C_API (import
 * _earley first: PyCapsule_Import walks the package's attributes). */
#ifndef SG_EARLEY_API_H
#define SG_EARLEY_API_H

#include <stdint.h>

#define SG_EARLEY_API_NAME "structgen.fsm.grammar._earley._C_API"

typedef struct {
    /* the Charts type: a caller checks its object is one before calling scan */
    PyTypeObject *charts_type;
    /* charts.scan(node, terminal): the node after one lexeme of terminal at node (memoised);
     * -1 with an exception set (IndexError for a node not built or a terminal out of range,
     * the charts' too_complex class past the item budget) */
    int32_t (*scan)(PyObject *charts, int32_t node, int32_t terminal);
} SgEarleyApi;

#endif
