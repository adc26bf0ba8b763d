/* Scopes: temporaries made between em_scope_begin() and em_scope_end() are released at the end,
 * unless em_keep() hands them to the enclosing scope (or to the caller, at the outermost level).
 * A training step inside a scope runs at constant memory. Scopes nest and are per thread. */
#ifndef EMBER_SCOPE_H
#define EMBER_SCOPE_H

#ifdef __cplusplus
extern "C" {
#endif

struct em_tensor;

void em_scope_begin(void);
void em_scope_end(void);
struct em_tensor *em_keep(struct em_tensor *t); /* returns t; NULL passes through */
int em_scope_depth(void);

#ifdef __cplusplus
}
#endif

#endif
