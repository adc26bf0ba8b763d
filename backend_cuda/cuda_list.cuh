/* Lists of arrays in one launch (the fused optimizer updates, unscaling, norm sums, clipping): a
 * list travels by value in the kernel's parameters; blockIdx.y picks the array, blocks along x
 * stride over its elements. A list of up to LIST_SMALL arrays takes a small parameter block;
 * longer ones take chunks of LIST_LARGE (up to 32 KiB of kernel parameters, CUDA 12.1 and up),
 * so that a parameter group of up to LIST_LARGE arrays is one launch. */
#ifndef EMBER_CUDA_LIST_CUH
#define EMBER_CUDA_LIST_CUH

#include "backend_cuda/cuda_real.cuh"

#define LIST_SMALL 48
#define LIST_LARGE 600
#define LIST_THREADS 256
#define LIST_BLOCKS_X 256 /* blocks per array: enough to fill the GPU over a few arrays */

/* One launch's arrays: up to N of them, with the rule's state buffers. */
template <int N> struct list_chunk {
    int n;
    int64_t numel[N];
    void *data[N];
    const void *grad[N];
    void *state[3][N]; /* NULL where the rule keeps no such state */
};

/* Arrays [first, first + N) of l as a chunk; the largest array's size in *longest. */
template <int N> static void chunk_of_list(const em_array_list *l, int first, list_chunk<N> *c,
                                           int64_t *longest)
{
    c->n = l->n - first < N ? l->n - first : N;
    *longest = 0;
    for (int i = 0; i < c->n; i++) {
        c->numel[i] = l->numel[first + i];
        c->data[i] = l->data[first + i];
        c->grad[i] = l->grad ? l->grad[first + i] : NULL;
        for (int k = 0; k < 3; k++)
            c->state[k][i] = l->state[k] ? l->state[k][first + i] : NULL;
        *longest = c->numel[i] > *longest ? c->numel[i] : *longest;
    }
}

/* The grid of a chunk of n arrays whose longest has `longest` elements. */
static inline dim3 list_grid(int n, int64_t longest)
{
    int64_t x = (longest + LIST_THREADS - 1) / LIST_THREADS;
    return dim3((unsigned)(x < 1 ? 1 : x > LIST_BLOCKS_X ? LIST_BLOCKS_X : x), (unsigned)n);
}

/* launch(chunk, grid, first) for each chunk of l, the chunk holding arrays [first, first + n):
 * one chunk of LIST_SMALL where they fit, else chunks of LIST_LARGE. launch queues its kernels
 * and returns an em_cuda status; the first failure ends the walk. */
template <typename F> static int for_each_chunk(const em_array_list *l, F launch)
{
    int64_t longest;
    if (l->n == 0)
        return EM_KERNEL_OK;
    if (l->n <= LIST_SMALL) {
        list_chunk<LIST_SMALL> c;
        chunk_of_list(l, 0, &c, &longest);
        return launch(c, list_grid(c.n, longest), 0);
    }
    for (int first = 0; first < l->n; first += LIST_LARGE) {
        static thread_local list_chunk<LIST_LARGE> c; /* 29 KB: kept off the stack */
        chunk_of_list(l, first, &c, &longest);
        int rc = launch(c, list_grid(c.n, longest), first);
        if (rc != EM_KERNEL_OK)
            return rc;
    }
    return EM_KERNEL_OK;
}

#endif
