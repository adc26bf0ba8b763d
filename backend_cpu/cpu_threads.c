/* The CPU backend's thread governor: how many OpenMP threads a kernel forks, the user's count
 * (omp_get_max_threads) while the cores are free, fewer while other processes hold them. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend_cpu/cpu_kernels_internal.h"

/* Every parallel region of the backend forks em_cpu_threads() threads. Each thread that forks
 * keeps its own state (OpenMP's thread count is per thread too): every WINDOW_NS of wall time
 * it reads how long it waited on a run queue (/proc/thread-self/schedstat) and, while below the
 * user's count, how long its CPUs sat idle (/proc/stat), and em_cpu_team_next moves the team one
 * thread down or up, or back to the user's count after a window in which the thread ran no
 * kernels for a second or more. A thread of the team that waits for a core holds up the whole region at
 * its end, so a team larger than the free cores is slower than one that fits them.
 * The kernels compute each output in an order that does not depend on the thread count (fixed
 * blocks, fixed partial-sum order), so the team size never changes their results, only their
 * speed. One exception: a product of the A^T B form (a weight gradient) that em_cpu_gemm cuts
 * into one block of rows per thread, since OpenBLAS's sums for a row depend on the block it is in;
 * a Linear's weight gradient (em_cpu_linear_grad) is cut in fixed blocks instead. */

#define WINDOW_NS 100000000LL /* 100 ms between samples */
/* A window this long held no kernels of the thread for most of it (the thread waited on I/O, a
 * child process or its own serial code), so what the machine did then says nothing of the
 * cores the kernels will find: the team starts again at the user's count. Without this a
 * benchmark's case began with the team the case before ended with, judged on a window
 * stretched over the PyTorch round run in between. */
#define STALE_NS EM_CPU_STALE_WINDOW_NS
/* A run-queue wait above this share of the window shrinks the team. Measured on 2 cores with 2
 * threads (ember bench train; ember train mlp and cnn, with 2 loader workers): idle, the forking
 * thread waited under 3.5% of 9 windows in 10, at most 16%; beside a busy process, 25-50%. */
#define SHRINK_WAIT 0.10
/* This many CPUs' worth of idle time over the window grows a team below the user's count. */
#define GROW_IDLE 0.7

typedef struct {
    int ceiling;      /* the user's count the team was last set from */
    int team;         /* threads the next region forks */
    bool open;        /* a window is open: the three below are its start */
    int64_t start_ns; /* CLOCK_MONOTONIC */
    int64_t wait_ns;  /* this thread's run-queue wait so far; -1: unreadable */
    double idle_s;    /* idle seconds so far of this thread's CPUs; -1: not read or unreadable */
} governor;

static _Thread_local governor gov;

bool em_cpu_threads_adaptive(void)
{
    static atomic_int on = -1;
    int v = atomic_load_explicit(&on, memory_order_relaxed);
    if (v < 0) {
        const char *env = getenv("EMBER_ADAPTIVE_THREADS");
        v = !(env && env[0] == '0');
        atomic_store_explicit(&on, v, memory_order_relaxed);
    }
    return v;
}

int em_cpu_team_next(const em_cpu_load *w, int team, int ceiling)
{
    if (ceiling < 1)
        ceiling = 1;
    team = team < 1 ? 1 : team > ceiling ? ceiling : team;
    if (w->wait_ns < 0 || (team < ceiling && w->idle_cpus < 0))
        return ceiling; /* a signal that cannot be read: the user's count */
    if (w->wall_ns <= 0)
        return team;
    if (w->wall_ns >= STALE_NS)
        return ceiling;
    if (team > 1 && (double)w->wait_ns > SHRINK_WAIT * (double)w->wall_ns)
        return team - 1;
    if (team < ceiling && w->idle_cpus >= GROW_IDLE)
        return team + 1;
    return team;
}

bool em_cpu_parse_schedstat(const char *text, int64_t *wait_ns)
{
    long long run, wait;
    if (sscanf(text, "%lld %lld", &run, &wait) != 2 || wait < 0)
        return false;
    *wait_ns = wait;
    return true;
}

bool em_cpu_parse_idle(const char *text, const cpu_set_t *cpus, size_t setsize, double *idle_s)
{
    const long hz = sysconf(_SC_CLK_TCK);
    double ticks = 0;
    int found = 0;
    for (const char *line = text; line && strncmp(line, "cpu", 3) == 0;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        int cpu;
        unsigned long long user, nice, system, idle, iowait;
        /* the first line ("cpu  ...") sums all CPUs and does not match */
        if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu", &cpu, &user, &nice, &system, &idle,
                   &iowait) == 6 && cpu >= 0 && CPU_ISSET_S((size_t)cpu, setsize, cpus)) {
            ticks += (double)(idle + iowait);
            found++;
        }
    }
    if (found == 0 || hz <= 0)
        return false;
    *idle_s = ticks / (double)hz;
    return true;
}

/* The text of a /proc file into buf (n bytes at most, with the NUL); false when unreadable. */
static bool read_proc(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t got = 0;
    for (ssize_t r; got < n - 1 && (r = read(fd, buf + got, n - 1 - got)) > 0;)
        got += (size_t)r;
    close(fd);
    buf[got] = '\0';
    return got > 0;
}

/* This thread's run-queue wait so far in ns; -1 when unreadable. */
static int64_t thread_wait(void)
{
    char text[128];
    int64_t wait;
    return read_proc("/proc/thread-self/schedstat", text, sizeof text)
                   && em_cpu_parse_schedstat(text, &wait)
               ? wait
               : -1;
}

/* Idle seconds so far of the CPUs this thread may run on; -1 when unreadable. /proc/stat's
 * per-CPU lines come first, read up to them. */
static double cpus_idle(void)
{
    const long conf = sysconf(_SC_NPROCESSORS_CONF), ncpu = conf > 0 ? conf : 1;
    const size_t setsize = CPU_ALLOC_SIZE(ncpu), textsize = 4096 + 128 * (size_t)ncpu;
    cpu_set_t *cpus = CPU_ALLOC(ncpu);
    char *text = malloc(textsize);
    double idle = -1;
    const bool ok = cpus && text && sched_getaffinity(0, setsize, cpus) == 0
                    && read_proc("/proc/stat", text, textsize)
                    && em_cpu_parse_idle(text, cpus, setsize, &idle);
    CPU_FREE(cpus);
    free(text);
    return ok ? idle : -1;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Close the window that ends at `now`, choose the team and open the next window. The CPUs' idle
 * time is read only while the team is below the user's count, the one case that needs it. */
static void govern(int64_t now)
{
    const int64_t wait = thread_wait();
    double idle = gov.team < gov.ceiling ? cpus_idle() : -1;
    if (gov.open) {
        const double wall_s = (double)(now - gov.start_ns) * 1e-9;
        const em_cpu_load w = {
            .wall_ns = now - gov.start_ns,
            .wait_ns = wait >= 0 && gov.wait_ns >= 0 ? wait - gov.wait_ns : -1,
            .idle_cpus = idle >= 0 && gov.idle_s >= 0 ? (idle - gov.idle_s) / wall_s : -1};
        const int team = gov.team;
        gov.team = em_cpu_team_next(&w, team, gov.ceiling);
        if (gov.team < team && idle < 0)
            idle = cpus_idle(); /* just shrunk from the ceiling: the next window starts here */
    }
    gov.open = true;
    gov.start_ns = now;
    gov.wait_ns = wait;
    gov.idle_s = idle;
}

int em_cpu_set_threads(int n)
{
    omp_set_num_threads(n);
    return EM_KERNEL_OK;
}

int em_cpu_max_threads(void)
{
    return omp_get_max_threads();
}

int em_cpu_threads(void)
{
    if (omp_in_parallel())
        return 1;
    const int ceiling = omp_get_max_threads();
    if (ceiling <= 1 || !em_cpu_threads_adaptive())
        return ceiling;
    if (ceiling != gov.ceiling) { /* the first call, or the user set a new count: start there */
        gov.ceiling = ceiling;
        gov.team = ceiling;
        gov.open = false;
    }
    const int64_t now = now_ns();
    if (!gov.open || now - gov.start_ns >= WINDOW_NS)
        govern(now);
    return gov.team;
}

void em_cpu_run_tasks(int64_t tasks, bool threaded, em_cpu_task_fn task, void *ctx)
{
    const int nt = threaded && tasks > 1 ? em_cpu_threads() : 1;
    if (nt < 2) {
        for (int64_t t = 0; t < tasks; t++)
            task(ctx, t);
        return;
    }
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t t = 0; t < tasks; t++)
        task(ctx, t);
}
