/* attacks/tests/audit_test_small.h — the small mlp the audit tests share (in 8, hidden 16,
 * classes 4, |D| = 8: 212 parameters, ~10^4 reference trials/s). */
#ifndef AUDIT_TEST_SMALL_H
#define AUDIT_TEST_SMALL_H

#include "attacks/audit.h"

static inline void audit_test_small_model(audit_config *c) {
    c->mc.in = 8;
    c->mc.nhidden = 1;
    c->mc.hidden[0] = 16;
    c->mc.classes = 4;
    c->n = 8;
}

#endif
