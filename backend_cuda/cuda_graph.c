/* CUDA Graphs on the compute stream: a capture records the kernels, copies and library calls
 * queued on it (cudaStreamBeginCapture, relaxed mode: the loader's threads go on allocating),
 * nothing runs until the graph is launched, and a launch queues all of it again. Bytes copied
 * from the host inside the capture are kept in the graph's own page-locked buffer and copied
 * from there at each launch: the graph replays the values the capture saw. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda/cuda_internal.h"

#define CONSTANT_BYTES ((size_t)1 << 20) /* host bytes one capture may copy in */

typedef struct {
    cudaGraphExec_t exec;
    char *constants; /* page-locked: what the captured copies from the host read */
} graph;

/* The capture under way on the stream: one at a time. */
static struct {
    bool on;
    char *constants;
    size_t used;
    char broken[160]; /* why the capture cannot give a graph; "" while it can */
} capture;

bool em_cuda_capturing(void)
{
    return capture.on;
}

int em_cuda_capture_begin(void)
{
    if (capture.on)
        return em_cuda_fail("a graph is being captured already");
    capture.constants = em_cuda_host_alloc(CONSTANT_BYTES);
    if (!capture.constants)
        return em_cuda_fail("no page-locked host memory for the graph's constants");
    int rc = em_cuda_status(cudaStreamBeginCapture(em_cuda_stream(),
                                                   cudaStreamCaptureModeRelaxed));
    if (rc != EM_KERNEL_OK) {
        em_cuda_host_free(capture.constants);
        return rc;
    }
    capture.on = true;
    capture.used = 0;
    capture.broken[0] = '\0';
    return EM_KERNEL_OK;
}

/* Inside a capture the device waits for nothing: what would make the host wait breaks it. */
int em_cuda_capture_refuse(const char *what)
{
    if (!capture.broken[0])
        snprintf(capture.broken, sizeof capture.broken, "%s inside a captured step (nothing "
                 "runs until the graph is launched)", what);
    return em_cuda_fail(capture.broken);
}

int em_cuda_capture_host_copy(void *dst, const void *src_host, size_t nbytes)
{
    size_t at = capture.used;
    if (nbytes > CONSTANT_BYTES - at) {
        if (!capture.broken[0])
            snprintf(capture.broken, sizeof capture.broken, "more than %zu bytes copied from "
                     "the host inside a captured step", CONSTANT_BYTES);
        return em_cuda_fail(capture.broken);
    }
    memcpy(capture.constants + at, src_host, nbytes);
    capture.used = at + (nbytes + 15) / 16 * 16;
    return em_cuda_status(cudaMemcpyAsync(dst, capture.constants + at, nbytes,
                                          cudaMemcpyHostToDevice, em_cuda_launch_stream()));
}

int em_cuda_capture_end(void **out)
{
    cudaGraph_t g = NULL;
    int rc = em_cuda_status(cudaStreamEndCapture(em_cuda_stream(), &g));
    capture.on = false;
    if (rc == EM_KERNEL_OK && capture.broken[0])
        rc = em_cuda_fail(capture.broken);
    graph *kept = rc == EM_KERNEL_OK ? calloc(1, sizeof *kept) : NULL;
    if (rc == EM_KERNEL_OK && !kept)
        rc = em_cuda_fail("out of host memory for the graph");
    if (rc == EM_KERNEL_OK)
        rc = em_cuda_status(cudaGraphInstantiate(&kept->exec, g, 0));
    if (g)
        cudaGraphDestroy(g);
    if (rc != EM_KERNEL_OK) {
        free(kept);
        em_cuda_host_free(capture.constants);
        return rc;
    }
    kept->constants = capture.constants;
    *out = kept;
    return EM_KERNEL_OK;
}

int em_cuda_graph_launch(void *g)
{
    em_cuda_count_launch();
    return em_cuda_status(cudaGraphLaunch(((graph *)g)->exec, em_cuda_stream()));
}

void em_cuda_graph_free(void *g)
{
    graph *kept = g;
    if (!kept)
        return;
    cudaGraphExecDestroy(kept->exec);
    em_cuda_host_free(kept->constants);
    free(kept);
}
