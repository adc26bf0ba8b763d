/* Built instead of distributed/nccl.c when ember has no CUDA backend or CMake found no NCCL beside the
 * CUDA toolkit: a collective on CUDA tensors fails here with a clear error. */
#include <stdio.h>

#include "distributed/dist_internal.h"

bool em_nccl_built(void)
{
    return false;
}

void em_nccl_bind_device(int local_rank)
{
    (void)local_rank;
}

void em_nccl_finalize(void)
{
}

static em_status absent_start(em_dist_work *w, void **handle, char *msg)
{
    *handle = NULL;
    snprintf(msg, EM_DIST_MSG_MAX, "%s: this build of ember has no NCCL (CMake found no nccl.h "
             "and libnccl); CUDA tensors cannot be reduced across processes", w->fn);
    return EM_ERR_UNSUPPORTED;
}

static em_status absent_test(void *handle, bool *done, char *msg)
{
    (void)handle;
    (void)msg;
    *done = true;
    return EM_OK;
}

static void absent_abandon(void *handle)
{
    (void)handle;
}

const em_dist_transport em_nccl_transport = {NULL, NULL, absent_start, absent_test, absent_abandon};
