/* The CPU backend's thread governor: its decision on hand-made windows, the /proc parsers, the
 * user's count (set through OpenMP and through em_set_num_threads) and the opt-out, what
 * em_device_details says of it, and a live run where a spinning process takes one of two CPUs. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <omp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend_cpu/cpu_kernels_internal.h"
#include "tensor/tensor.h"

#define MS 1000000LL /* ns */

static em_cpu_load load(int64_t wall_ms, int64_t wait_ms, double idle_cpus)
{
    return (em_cpu_load){.wall_ns = wall_ms * MS, .wait_ns = wait_ms * MS, .idle_cpus = idle_cpus};
}

static int next(em_cpu_load w, int team, int ceiling)
{
    return em_cpu_team_next(&w, team, ceiling);
}

Test(cpu_threads, waiting_for_a_core_shrinks_by_one)
{
    cr_assert_eq(next(load(100, 35, -1), 2, 2), 1);  /* a busy process on one of 2 cores */
    cr_assert_eq(next(load(100, 11, -1), 8, 8), 7);  /* just over 10% */
    cr_assert_eq(next(load(100, 50, 0.0), 5, 8), 4); /* below the ceiling too */
    cr_assert_eq(next(load(200, 30, 0.9), 2, 4), 1); /* waiting wins over an idle CPU */
}

Test(cpu_threads, never_below_one)
{
    cr_assert_eq(next(load(100, 90, 0.0), 1, 2), 1);
    cr_assert_eq(next(load(100, 90, 0.0), 0, 2), 1);
    cr_assert_eq(next(load(100, 90, 0.0), -3, 4), 1);
}

Test(cpu_threads, an_idle_cpu_grows_by_one)
{
    cr_assert_eq(next(load(100, 0, 0.95), 1, 2), 2); /* the busy process stopped */
    cr_assert_eq(next(load(100, 2, 0.7), 3, 8), 4);
    cr_assert_eq(next(load(100, 2, 6.0), 3, 8), 4); /* one at a time */
}

Test(cpu_threads, steady_when_neither_signal_fires)
{
    cr_assert_eq(next(load(100, 10, 0.69), 1, 2), 1); /* the other process still runs */
    cr_assert_eq(next(load(100, 3, -1), 4, 4), 4);    /* idle machine at the ceiling */
    cr_assert_eq(next(load(0, 0, 0), 3, 4), 3);        /* an empty window */
}

Test(cpu_threads, a_window_without_kernels_starts_again_at_the_users_count)
{
    const int64_t stale_ms = EM_CPU_STALE_WINDOW_NS / MS;
    cr_assert_eq(next(load(stale_ms, 0, 0.0), 1, 2), 2); /* a PyTorch round in between */
    cr_assert_eq(next(load(stale_ms * 5, stale_ms * 4, 0.0), 1, 4), 4);
    cr_assert_eq(next(load(stale_ms - 1, 0, 0.0), 1, 2), 1); /* shorter: judged as before */
}

Test(cpu_threads, never_above_the_ceiling)
{
    cr_assert_eq(next(load(100, 0, 1.5), 2, 2), 2);
    cr_assert_eq(next(load(100, 0, 1.5), 6, 2), 2); /* the user lowered the count */
    cr_assert_eq(next(load(100, 0, 0.0), 6, 4), 4);
    cr_assert_eq(next(load(100, 0, 1.0), 1, 0), 1); /* a ceiling below 1 reads as 1 */
}

Test(cpu_threads, unreadable_proc_gives_the_users_count)
{
    cr_assert_eq(next(load(100, -1, 0.0), 1, 4), 4); /* no schedstat */
    cr_assert_eq(next(load(100, -1, 0.0), 4, 4), 4);
    cr_assert_eq(next(load(100, 0, -1), 2, 4), 4);   /* below the ceiling without /proc/stat */
    cr_assert_eq(next(load(100, 50, -1), 4, 4), 3);  /* at the ceiling /proc/stat is not needed */
}

Test(cpu_threads, parses_schedstat)
{
    int64_t wait = -1;
    cr_assert(em_cpu_parse_schedstat("4113612404 25081513 1702\n", &wait));
    cr_assert_eq(wait, 25081513);
    cr_assert_not(em_cpu_parse_schedstat("", &wait));
    cr_assert_not(em_cpu_parse_schedstat("12\n", &wait));
    cr_assert_not(em_cpu_parse_schedstat("1 -5 3\n", &wait));
    cr_assert_eq(wait, 25081513);
}

static const char proc_stat[] =
    "cpu  86037 0 15982 94233 793 0 98 87 0 0\n"
    "cpu0 43000 0 8000 47000 300 0 50 40 0 0\n"
    "cpu1 43037 0 7982 47233 493 0 48 47 0 0\n"
    "cpu2 100 0 100 500 7 0 0 0 0 0\n"
    "intr 123 4 5 6\n"
    "cpu3 1 1 1 1000000 1 0 0 0 0 0\n"; /* not a CPU line: past the CPUs */

Test(cpu_threads, parses_the_idle_time_of_the_cpus_in_a_set)
{
    const double hz = (double)sysconf(_SC_CLK_TCK);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(1, &set);
    CPU_SET(2, &set);
    double idle = -1;
    cr_assert(em_cpu_parse_idle(proc_stat, &set, sizeof set, &idle));
    cr_assert_float_eq(idle, (47233 + 493 + 500 + 7) / hz, 1e-9);
    CPU_ZERO(&set);
    CPU_SET(3, &set);
    cr_assert_not(em_cpu_parse_idle(proc_stat, &set, sizeof set, &idle));
    CPU_SET(0, &set);
    cr_assert(em_cpu_parse_idle(proc_stat, &set, sizeof set, &idle));
    cr_assert_float_eq(idle, (47000 + 300) / hz, 1e-9);
    cr_assert_not(em_cpu_parse_idle("", &set, sizeof set, &idle));
}

Test(cpu_threads, follows_the_users_count)
{
    omp_set_num_threads(3);
    cr_assert_eq(em_cpu_threads(), 3);
    omp_set_num_threads(1);
    cr_assert_eq(em_cpu_threads(), 1);
    omp_set_num_threads(2);
    cr_assert_eq(em_cpu_threads(), 2);
    int inside = 0;
    #pragma omp parallel num_threads(2)
    #pragma omp single
    inside = em_cpu_threads();
    cr_assert_eq(inside, 1);
    cr_assert_eq(omp_get_max_threads(), 2); /* the governor never sets OpenMP's count */
}

/* em_set_num_threads, torch.set_num_threads's counterpart: the count the kernels fork from this
 * thread (the governor's ceiling, OpenMP's count), read back by em_get_num_threads and shown by
 * em_device_describe; fewer than one thread is refused and changes nothing. */
Test(cpu_threads, set_from_the_api)
{
    cr_assert_eq(em_set_num_threads(3), EM_OK, "%s", em_error());
    cr_assert_eq(em_get_num_threads(), 3);
    cr_assert_eq(omp_get_max_threads(), 3);
    cr_assert_eq(em_cpu_threads(), 3);
    char about[256];
    em_device_describe(EM_CPU, about, sizeof about);
    cr_assert(strncmp(about, "3 OpenMP threads", 16) == 0, "%s", about);
    cr_assert_eq(em_set_num_threads(0), EM_ERR_ARG);
    cr_assert_str_eq(em_error(), "em_set_num_threads: 0 threads; at least 1");
    em_error_clear();
    cr_assert_eq(em_get_num_threads(), 3);
    cr_assert_eq(em_set_num_threads(1), EM_OK);
    cr_assert_eq(em_cpu_threads(), 1);
    cr_assert_eq(em_set_num_threads(2), EM_OK);
    cr_assert_eq(em_get_num_threads(), 2);
}

Test(cpu_threads, env_turns_it_off)
{
    setenv("EMBER_ADAPTIVE_THREADS", "0", 1);
    cr_assert_not(em_cpu_threads_adaptive());
    omp_set_num_threads(2);
    cr_assert_eq(em_cpu_threads(), 2);
}

/* The CPU's details: the governor's state, then each feature as the CPU reports it. */
static void expect_details(const char *governor)
{
    char buf[2048], want[512];
    cr_assert_eq(em_device_details(EM_CPU, buf, sizeof buf), buf);
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    snprintf(want, sizeof want, "thread governor: %s\nCPU features: AVX2+FMA %s, AVX-512 ",
             governor, avx2 ? "yes" : "no");
    cr_expect_eq(strncmp(buf, want, strlen(want)), 0, "'%s' does not start with '%s'", buf, want);
    cr_expect(strstr(buf, ", F16C yes, AVX512_BF16 ") || strstr(buf, ", F16C no, AVX512_BF16 "),
              "%s", buf);
    cr_expect(strstr(buf, "\nproducts on the cpu (engine, ISA):\nf32   ember: "), "%s", buf);
    cr_expect(strstr(buf, "\nbf16  ") && strstr(buf, "\nint8  "), "%s", buf);
}

Test(cpu_threads, device_details_say_whether_the_governor_is_on)
{
    unsetenv("EMBER_ADAPTIVE_THREADS");
    expect_details("on (fewer threads while other processes hold the cores; "
                   "EMBER_ADAPTIVE_THREADS=0 turns it off)");
    char buf[64];
    if (!em_device_available(EM_CUDA))
        cr_expect_str_eq(em_device_details(EM_CUDA, buf, sizeof buf), "not available");
}

Test(cpu_threads, device_details_say_when_the_governor_is_off)
{
    setenv("EMBER_ADAPTIVE_THREADS", "0", 1);
    expect_details("off (EMBER_ADAPTIVE_THREADS=0)");
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Idle seconds so far of the CPUs in set; -1 when /proc/stat cannot be read. */
static double idle_of(const cpu_set_t *set)
{
    static char text[1 << 16];
    FILE *f = fopen("/proc/stat", "r");
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[got] = '\0';
    double idle;
    return em_cpu_parse_idle(text, set, sizeof *set, &idle) ? idle : -1;
}

/* Products on the team until em_cpu_threads() returns `want` or `ms` pass; the ms it took, or
 * -1. */
static int64_t work_until(int want, int64_t ms, float *a, float *b, float *c, int64_t n)
{
    const int64_t t0 = now_ms();
    while (now_ms() - t0 < ms) {
        em_cpu_gemm(EM_F32, false, false, n, n, n, 1.0, a, n, 0, b, n, 0, 0.0, c, n, 0, 1);
        if (em_cpu_threads() == want)
            return now_ms() - t0;
    }
    return -1;
}

/* With this process on two CPUs and another spinning on one of them, a team of 2 shrinks to 1
 * within a second; after the spinner is killed it grows back to 2. */
Test(cpu_threads, shrinks_under_a_spinning_process_and_grows_back)
{
    cpu_set_t all, two, one;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2)
        cr_skip_test("the governor needs 2 CPUs to share and this process has fewer");
    if (access("/proc/thread-self/schedstat", R_OK) != 0)
        cr_skip_test("no /proc/thread-self/schedstat: the governor keeps the user's count here");
    CPU_ZERO(&two);
    CPU_ZERO(&one);
    for (int cpu = 0, n = 0; cpu < CPU_SETSIZE && n < 2; cpu++)
        if (CPU_ISSET(cpu, &all)) {
            CPU_SET(cpu, &two);
            if (n++ == 1)
                CPU_SET(cpu, &one);
        }
    cr_assert_eq(sched_setaffinity(0, sizeof two, &two), 0); /* the team's threads inherit it */
    const pid_t parent = getpid(), spinner = fork();
    cr_assert_neq(spinner, -1);
    if (spinner == 0) { /* dies with the test, and after 5 s whatever happens */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        sched_setaffinity(0, sizeof one, &one);
        for (int64_t t0 = now_ms(); getppid() == parent && now_ms() - t0 < 5000;)
            ;
        _exit(0);
    }
    const int64_t n = 256;
    float *a = calloc((size_t)(n * n), sizeof(float)), *b = calloc((size_t)(n * n), sizeof(float));
    float *c = calloc((size_t)(n * n), sizeof(float));
    omp_set_num_threads(2);
    cr_assert_eq(em_cpu_threads(), 2);
    const int64_t shrank = work_until(1, 1000, a, b, c, n);
    kill(spinner, SIGKILL);
    waitpid(spinner, NULL, 0);
    cr_assert_geq(shrank, 0, "the team stayed at 2 for 1 s beside a spinning process");
    const double idle0 = idle_of(&two);
    const int64_t t0 = now_ms(), grew = work_until(2, 1500, a, b, c, n);
    const double idle_cpus = (idle_of(&two) - idle0) / ((double)(now_ms() - t0) / 1000);
    free(a);
    free(b);
    free(c);
    cr_log_info("team 2 -> 1 in %lld ms with a spinner, 1 -> 2 in %lld ms after it stopped",
                (long long)shrank, (long long)grew);
    if (grew < 0 && idle0 >= 0 && idle_cpus < 0.7)
        cr_skip_test("the two CPUs stayed busy after the spinner stopped (%.2f of a CPU idle: "
                     "another process): the growth back was not checked", idle_cpus);
    cr_assert_geq(grew, 0, "the team stayed at 1 for 1.5 s with %.2f of a CPU idle", idle_cpus);
}
