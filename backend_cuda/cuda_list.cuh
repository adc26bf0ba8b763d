/* Lists of arrays in one launch (the fused optimizer updates, unscaling, norm sums): a list of up
 * to LIST_MAX arrays travels by value in the kernel's parameters; blockIdx.y picks the array,
 * blocks along x stride over its elements. Longer lists take several launches. */
#ifndef EMBER_CUDA_LIST_CUH
#define EMBER_CUDA_LIST_CUH

#include "backend_cuda/cuda_real.cuh"

#define LIST_MAX 48
#define LIST_THREADS 256
#define LIST_BLOCKS_X 256 /* blocks per array: enough to fill the GPU over a few arrays */

/* One launch's arrays: up to LIST_MAX of them, with the rule's state buffers. */
struct list_chunk {
    int n;
    int64_t numel[LIST_MAX];
    void *data[LIST_MAX];
    const void *grad[LIST_MAX];
    void *state[3][LIST_MAX]; /* NULL where the rule keeps no such state */
};

/* Arrays [first, first + LIST_MAX) of l as a chunk; the largest array's size in *longest. */
static inline list_chunk chunk_of_list(const em_array_list *l, int first, int64_t *longest)
{
    list_chunk c = {};
    c.n = l->n - first < LIST_MAX ? l->n - first : LIST_MAX;
    *longest = 0;
    for (int i = 0; i < c.n; i++) {
        c.numel[i] = l->numel[first + i];
        c.data[i] = l->data[first + i];
        c.grad[i] = l->grad ? l->grad[first + i] : NULL;
        for (int k = 0; k < 3; k++)
            c.state[k][i] = l->state[k] ? l->state[k][first + i] : NULL;
        *longest = c.numel[i] > *longest ? c.numel[i] : *longest;
    }
    return c;
}

/* The grid of one chunk whose longest array has `longest` elements. */
static inline dim3 list_grid(const list_chunk &c, int64_t longest)
{
    int64_t x = (longest + LIST_THREADS - 1) / LIST_THREADS;
    return dim3((unsigned)(x < 1 ? 1 : x > LIST_BLOCKS_X ? LIST_BLOCKS_X : x), (unsigned)c.n);
}

#endif
