/* Device time for the profiler: a pair of CUDA events recorded on the compute stream around an
 * op's work, read (after waiting for the second) when the profiler stops; none for the ops of a
 * captured graph, which run only when it is launched. */
#include <stdlib.h>

#include "backend_cuda/cuda_internal.h"

typedef struct {
    cudaEvent_t start, stop;
} cuda_timer;

void *em_cuda_timer_start(void)
{
    if (em_cuda_capturing())
        return NULL;
    cuda_timer *t = malloc(sizeof *t);
    if (!t)
        return NULL;
    if (cudaEventCreate(&t->start) != cudaSuccess) {
        free(t);
        return NULL;
    }
    if (cudaEventCreate(&t->stop) != cudaSuccess) {
        cudaEventDestroy(t->start);
        free(t);
        return NULL;
    }
    cudaEventRecord(t->start, em_cuda_stream());
    return t;
}

void em_cuda_timer_stop(void *timer)
{
    cudaEventRecord(((cuda_timer *)timer)->stop, em_cuda_stream());
}

int em_cuda_timer_read(void *timer, double *ms)
{
    cuda_timer *t = timer;
    float elapsed = 0;
    cudaError_t err = cudaEventSynchronize(t->stop);
    if (err == cudaSuccess)
        err = cudaEventElapsedTime(&elapsed, t->start, t->stop);
    if (ms)
        *ms = elapsed;
    cudaEventDestroy(t->start);
    cudaEventDestroy(t->stop);
    free(t);
    return em_cuda_status(err);
}
