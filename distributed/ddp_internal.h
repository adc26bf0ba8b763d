/* What the DDP files share: its parameters and buckets, and the start-up checks. Not installed. */
#ifndef EMBER_DDP_INTERNAL_H
#define EMBER_DDP_INTERNAL_H

#include "distributed/dist_internal.h"

typedef struct {
    em_tensor *param;  /* borrowed from the module */
    const char *name;  /* its dotted name, owned by the module */
    em_tensor *slot;   /* owned: a view of its place in the bucket, with the param's shape */
    int bucket;
    int64_t offset;    /* elements into the bucket */
    bool ready;        /* its gradient is in the bucket this pass */
} ddp_param;

typedef struct {
    em_tensor *flat;   /* owned: (numel) of the params' dtype, on their device */
    int first, n;      /* params [first, first + n) */
    int64_t numel;
    int pending;       /* params whose gradient has not come in this pass */
    bool launched;
    em_dist_work work;
} ddp_bucket;

typedef struct {
    const em_tensor *param;
    int index;
} ddp_lookup;

struct em_ddp {
    em_module *m;
    ddp_param *params;     /* (n_params) in reverse module order */
    ddp_lookup *by_address; /* (n_params) sorted by param address */
    int n_params;
    ddp_bucket *buckets;   /* (n_buckets) */
    int n_buckets;
    int next_launch;       /* buckets launch in order */
    bool sync;             /* em_ddp_set_sync */
    bool in_pass;          /* a hook fired in this synchronised backward */
    bool unsynced;         /* a backward ran without sync since the grads were last averaged */
    bool hooked;
    em_status status;      /* this pass's first error */
    em_ddp_stats stats;
};

/* Every rank has the parameters and buffers rank 0 has (names, dtypes, shapes); on a difference
 * every rank fails with the same message naming the first difference and the ranks. */
em_status em_ddp_check_same_params(em_module *m);
/* Rank 0's parameters and buffers into every rank's. */
em_status em_ddp_broadcast_state(em_module *m);

#endif
