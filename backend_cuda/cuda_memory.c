/* The CUDA backend's device, stream and memory: one non-blocking compute stream that every
 * kernel, copy and cuBLAS call is ordered on, device allocations, copies that wait for the
 * stream, kernel scratch through the accounting allocator, and the counts of what was queued. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda/cuda_internal.h"

static cudaStream_t stream, copy_stream;
static cublasHandle_t cublas;
static bool tf32;
/* cuBLAS's and cuBLASLt's workspace: theirs in turn, on the one stream. Made with the handle, so
 * that no library allocates inside a captured graph (cuda_graph.c). */
#define WORKSPACE_BYTES ((size_t)32 << 20)
static void *workspace;
static em_device_counts counts; /* updated with relaxed atomics: any thread may queue work */

bool em_cuda_init(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
        return false;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
        return false;
    if (cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking) != cudaSuccess) {
        cudaStreamDestroy(stream);
        return false;
    }
    if (cublasCreate(&cublas) != CUBLAS_STATUS_SUCCESS) {
        cudaStreamDestroy(stream);
        return false;
    }
    if (cudaMalloc(&workspace, WORKSPACE_BYTES) != cudaSuccess) {
        cudaGetLastError(); /* the libraries run without one, on fewer algorithms */
        workspace = NULL;
    }
    /* default math: f16/bf16 products on tensor cores, f32 products in f32 (no TF32) */
    return cublasSetStream(cublas, stream) == CUBLAS_STATUS_SUCCESS &&
           (!workspace || cublasSetWorkspace(cublas, workspace, WORKSPACE_BYTES) ==
                              CUBLAS_STATUS_SUCCESS) &&
           cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS;
}

void *em_cuda_workspace(size_t *nbytes)
{
    *nbytes = workspace ? WORKSPACE_BYTES : 0;
    return workspace;
}

bool em_cuda_tf32(void)
{
    return tf32;
}

cudaStream_t em_cuda_stream(void)
{
    return stream;
}

void em_cuda_count_launch(void)
{
    __atomic_fetch_add(&counts.launches, 1, __ATOMIC_RELAXED);
}

cudaStream_t em_cuda_launch_stream(void)
{
    em_cuda_count_launch();
    return stream;
}

void em_cuda_counts(em_device_counts *c)
{
    c->launches = __atomic_load_n(&counts.launches, __ATOMIC_RELAXED);
    c->host_waits = __atomic_load_n(&counts.host_waits, __ATOMIC_RELAXED);
    c->host_copies = __atomic_load_n(&counts.host_copies, __ATOMIC_RELAXED);
    c->host_copy_hash = __atomic_load_n(&counts.host_copy_hash, __ATOMIC_RELAXED);
    c->long_host_copies = __atomic_load_n(&counts.long_host_copies, __ATOMIC_RELAXED);
}

/* A hash of a host copy's bytes: 8 bytes a step (the tail zero-padded) through a multiply and a
 * shift, the length mixed in first. */
static uint64_t hash_bytes(uint64_t h, const void *src, size_t n)
{
    const unsigned char *p = src;
    h = (h ^ n) * 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, p + i, n - i < 8 ? n - i : 8);
        h = ((h ^ w) * 0xFF51AFD7ED558CCDull);
        h ^= h >> 29;
    }
    return h;
}

/* The counts of one copy from the host: its bytes' hash joins the sum. */
static void count_host_copy(const void *src_host, size_t nbytes)
{
    __atomic_fetch_add(&counts.host_copies, 1, __ATOMIC_RELAXED);
    if (nbytes > EM_HASHED_COPY_BYTES)
        __atomic_fetch_add(&counts.long_host_copies, 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&counts.host_copy_hash, hash_bytes(0, src_host, nbytes),
                           __ATOMIC_RELAXED);
}

void *em_cuda_stream_handle(void)
{
    return stream;
}

cublasHandle_t em_cuda_cublas(void)
{
    return cublas;
}

void em_cuda_describe(char *buf, size_t n)
{
    struct cudaDeviceProp p;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
        snprintf(buf, n, "cuda: device properties unavailable");
        return;
    }
    char dnn[96];
    em_cudnn_describe(dnn, sizeof dnn);
    snprintf(buf, n, "%s, %.1f GiB, compute capability %d.%d, %d multiprocessors, %s", p.name,
             (double)p.totalGlobalMem / (1 << 30), p.major, p.minor, p.multiProcessorCount, dnn);
}

int em_cuda_set_tf32(bool on)
{
    cublasMath_t mode = on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
    if (cublasSetMathMode(cublas, mode) != CUBLAS_STATUS_SUCCESS)
        return EM_KERNEL_FAILED;
    tf32 = on;
    return EM_KERNEL_OK;
}

/* What the CUDA runtime said of the last failure on this thread, until taken. */
static _Thread_local char failure[192];

int em_cuda_status(cudaError_t err)
{
    if (err == cudaSuccess)
        return EM_KERNEL_OK;
    snprintf(failure, sizeof failure, "%s (%s)", cudaGetErrorString(err), cudaGetErrorName(err));
    return EM_KERNEL_FAILED;
}

int em_cuda_fail(const char *why)
{
    snprintf(failure, sizeof failure, "%s", why);
    return EM_KERNEL_FAILED;
}

const char *em_cuda_take_failure(void)
{
    static _Thread_local char taken[sizeof failure];
    if (!failure[0])
        return NULL;
    snprintf(taken, sizeof taken, "%s", failure);
    failure[0] = '\0';
    return taken;
}

/* Debug builds, and any build with EMBER_CUDA_SYNC=1, wait for each kernel as it is launched, so
 * a fault inside one (an illegal address) fails the op that launched it rather than a later,
 * unrelated call. */
static bool sync_each_launch(void)
{
#ifndef NDEBUG
    return true;
#else
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("EMBER_CUDA_SYNC");
        on = v && *v && *v != '0';
    }
    return on;
#endif
}

int em_cuda_launch_status(void)
{
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess && sync_each_launch() && !em_cuda_capturing())
        err = cudaStreamSynchronize(stream);
    return em_cuda_status(err);
}

void *em_cuda_alloc(size_t nbytes)
{
    void *ptr = NULL;
    if (cudaMalloc(&ptr, nbytes ? nbytes : 1) != cudaSuccess) {
        cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        return NULL;
    }
    return ptr;
}

void em_cuda_free(void *ptr)
{
    cudaFree(ptr);
}

int em_cuda_copy_from_host(void *dst, const void *src_host, size_t nbytes)
{
    count_host_copy(src_host, nbytes);
    if (em_cuda_capturing())
        return em_cuda_capture_host_copy(dst, src_host, nbytes);
    /* from pageable memory the call returns once src_host has been staged: it may be reused */
    return em_cuda_status(cudaMemcpyAsync(dst, src_host, nbytes, cudaMemcpyHostToDevice,
                                          em_cuda_launch_stream()));
}

static int wait_for_stream(void)
{
    int rc = em_cuda_status(cudaStreamSynchronize(stream));
    return rc == EM_KERNEL_OK ? em_cuda_take_index_error() : rc;
}

/* Waits for the stream; a raised index flag is reported here, after the kernel that raised it. */
int em_cuda_synchronize(void)
{
    __atomic_fetch_add(&counts.host_waits, 1, __ATOMIC_RELAXED);
    if (em_cuda_capturing())
        return em_cuda_capture_refuse("waiting for the device");
    return wait_for_stream();
}

int em_cuda_copy_to_host(void *dst_host, const void *src, size_t nbytes)
{
    __atomic_fetch_add(&counts.host_waits, 1, __ATOMIC_RELAXED);
    if (em_cuda_capturing())
        return em_cuda_capture_refuse("a copy to the host");
    int rc = em_cuda_status(cudaMemcpyAsync(dst_host, src, nbytes, cudaMemcpyDeviceToHost,
                                            em_cuda_launch_stream()));
    return rc == EM_KERNEL_OK ? wait_for_stream() : rc;
}

void *em_cuda_host_alloc(size_t nbytes)
{
    void *ptr = NULL;
    if (cudaHostAlloc(&ptr, nbytes ? nbytes : 1, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return ptr;
}

void em_cuda_host_free(void *ptr_host)
{
    cudaFreeHost(ptr_host);
}

int em_cuda_mark(void **ev)
{
    if (em_cuda_capturing())
        return em_cuda_capture_refuse("marking the stream for the loader");
    cudaEvent_t e;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess)
        return EM_KERNEL_FAILED;
    if (cudaEventRecord(e, stream) != cudaSuccess) {
        cudaEventDestroy(e);
        return EM_KERNEL_FAILED;
    }
    *ev = e;
    return EM_KERNEL_OK;
}

/* On the copy stream, so that it overlaps the compute stream's kernels: it starts once the
 * compute stream has passed `after`, the compute stream waits for it on the device (the host
 * does not), and *done is an event the host can wait on. */
int em_cuda_copy_from_host_async(void *dst, const void *src_host, size_t nbytes, void *after,
                                 void **done)
{
    if (em_cuda_capturing())
        return em_cuda_capture_refuse("the loader's copy beside the stream");
    cudaEvent_t ev;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
        return EM_KERNEL_FAILED;
    int rc = after ? em_cuda_status(cudaStreamWaitEvent(copy_stream, (cudaEvent_t)after, 0))
                   : EM_KERNEL_OK;
    if (rc == EM_KERNEL_OK) {
        em_cuda_count_launch();
        rc = em_cuda_status(cudaMemcpyAsync(dst, src_host, nbytes, cudaMemcpyHostToDevice,
                                            copy_stream));
    }
    if (rc == EM_KERNEL_OK)
        rc = em_cuda_status(cudaEventRecord(ev, copy_stream));
    if (rc == EM_KERNEL_OK)
        rc = em_cuda_status(cudaStreamWaitEvent(stream, ev, 0));
    if (rc == EM_KERNEL_OK) {
        *done = ev;
        return EM_KERNEL_OK;
    }
    cudaEventDestroy(ev);
    return rc;
}

int em_cuda_event_wait(void *ev)
{
    int rc = em_cuda_status(cudaEventSynchronize((cudaEvent_t)ev));
    cudaEventDestroy((cudaEvent_t)ev);
    return rc;
}

void em_cuda_event_free(void *ev)
{
    cudaEventDestroy((cudaEvent_t)ev);
}

void *em_cuda_scratch(size_t nbytes)
{
    return em_workspace_alloc(em_cuda_table(), nbytes);
}

void em_cuda_scratch_free(void *ptr, size_t nbytes)
{
    em_workspace_free(em_cuda_table(), ptr, nbytes);
}
