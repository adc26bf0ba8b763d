/* DDP's start: every rank must hold the same parameters and buffers (names, dtypes, shapes), and
 * then gets rank 0's values. A difference is found by gathering a hash of each rank's list;
 * rank 0's list and the first differing rank's are then broadcast, so every rank fails with the
 * same message naming the first differing entry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/ddp_internal.h"

/* One line per parameter and buffer: "param 0.weight f32 [32,1,3,3]\n"; malloc'd. */
static char *describe(em_module *m)
{
    int np = em_module_parameters(m, NULL, 0), nb = em_module_buffers(m, NULL, 0);
    em_param_ref *refs = calloc((size_t)(np + nb) + 1, sizeof *refs);
    size_t cap = 256 * ((size_t)(np + nb) + 1), used = 0;
    char *s = malloc(cap);
    if (!refs || !s) {
        free(refs);
        free(s);
        em_set_error(EM_ERR_MEMORY, "em_ddp_new: out of memory");
        return NULL;
    }
    em_module_parameters(m, refs, np);
    em_module_buffers(m, refs + np, nb);
    s[0] = 0;
    for (int i = 0; i < np + nb; i++) {
        char shape[128];
        used += (size_t)snprintf(s + used, cap - used, "%s %.120s %s %s\n",
                                 i < np ? "parameter" : "buffer", refs[i].name,
                                 em_dtype_name(refs[i].value->dtype),
                                 em_shape_str(refs[i].value, shape, sizeof shape));
    }
    free(refs);
    return s;
}

static int64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (int64_t)(h >> 1);
}

/* Rank root's description, on every rank (malloc'd), or NULL with an error. */
static char *description_of(int root, const char *mine)
{
    em_scope_begin();
    em_tensor *len = em_scalar(em_dist_rank() == root ? (double)strlen(mine) + 1 : 0, EM_I64);
    char *out = NULL;
    if (len && em_dist_broadcast(len, root) == EM_OK) {
        int64_t n = (int64_t)em_item(len);
        em_tensor *bytes = em_zeros(EM_SHAPE(n), EM_U8);
        if (bytes && em_dist_rank() == root)
            memcpy(em_data_ptr(bytes), mine, (size_t)n);
        if (bytes && em_dist_broadcast(bytes, root) == EM_OK && (out = malloc((size_t)n)))
            memcpy(out, em_data_ptr(bytes), (size_t)n);
        else if (bytes && !em_has_error())
            em_set_error(EM_ERR_MEMORY, "em_ddp_new: out of memory");
    }
    em_scope_end();
    return out;
}

/* The first line where a and b differ, as "rank 0 has 'x', rank 1 has 'y'" into buf. */
static void first_difference(const char *a, const char *b, int rb, char *buf, size_t n)
{
    while (*a && *b) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || strncmp(a, b, la)) {
            snprintf(buf, n, "rank 0 has '%.*s', rank %d has '%.*s'", (int)la, a, rb, (int)lb, b);
            return;
        }
        a += la + (a[la] != 0);
        b += lb + (b[lb] != 0);
    }
    if (*a)
        snprintf(buf, n, "rank 0 has '%.*s', rank %d has nothing more", (int)strcspn(a, "\n"), a,
                 rb);
    else
        snprintf(buf, n, "rank %d has '%.*s', rank 0 has nothing more", rb,
                 (int)strcspn(b, "\n"), b);
}

em_status em_ddp_check_same_params(em_module *m)
{
    char *mine = describe(m);
    if (!mine)
        return em_error_status();
    int world = em_dist_world_size();
    em_status st = EM_OK;
    int differing = -1;
    em_scope_begin();
    em_tensor *hash = em_scalar((double)fnv1a(mine), EM_I64);
    em_tensor *all = em_zeros(EM_SHAPE(world), EM_I64);
    if (!hash || !all || em_dist_allgather(hash, all) != EM_OK)
        st = em_error_status();
    const int64_t *h = st == EM_OK ? em_data_ptr(all) : NULL;
    for (int r = 1; h && r < world && differing < 0; r++)
        if (h[r] != h[0])
            differing = r;
    em_scope_end();
    if (st == EM_OK && differing > 0) {
        char *first = description_of(0, mine);
        char *other = first ? description_of(differing, mine) : NULL;
        if (other) {
            char what[400];
            first_difference(first, other, differing, what, sizeof what);
            st = em_set_error(EM_ERR_ARG, "em_ddp_new: the ranks' models differ: %s", what);
        } else {
            st = em_error_status();
        }
        free(first);
        free(other);
    }
    free(mine);
    return st;
}

em_status em_ddp_broadcast_state(em_module *m)
{
    int np = em_module_parameters(m, NULL, 0), nb = em_module_buffers(m, NULL, 0);
    em_param_ref *refs = calloc((size_t)(np + nb) + 1, sizeof *refs);
    if (!refs)
        return em_set_error(EM_ERR_MEMORY, "em_ddp_new: out of memory");
    em_module_parameters(m, refs, np);
    em_module_buffers(m, refs + np, nb);
    em_status st = EM_OK;
    for (int i = 0; i < np + nb && st == EM_OK; i++)
        st = em_dist_broadcast(refs[i].value, 0);
    free(refs);
    return st;
}
