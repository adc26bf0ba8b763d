/* The ember command's default OpenMP wait policy: a thread at a barrier spins 10,000 times
 * (about 0.3 ms on the machine measured) before it sleeps: long enough to bridge the gaps
 * between the parallel regions of a training step (1,000 left mlp_b64 steps 20% slower), short
 * enough that idle threads do not burn a core for long (libgomp's own 300,000 spin for about
 * 9 ms). Under contention the CPU backend's thread governor shrinks the team, so the spin no
 * longer decides that case. libgomp reads GOMP_SPINCOUNT and OMP_WAIT_POLICY once, as it loads,
 * before main: so unless the user set one of them, the command runs itself again with
 * GOMP_SPINCOUNT=EMBER_SPINCOUNT, and takes the variable out of its environment again so that
 * the programs it starts (PyTorch's half of a benchmark) see the user's environment. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli_internal.h"

#define EMBER_SPINCOUNT "10000"
#define MARK "EMBER_DEFAULT_SPINCOUNT" /* set across the exec: the variable is ember's */

static char policy[96] = "libgomp's default (GOMP_SPINCOUNT 300000)";

void cli_wait_policy_init(char **argv)
{
    const char *spin = getenv("GOMP_SPINCOUNT"), *wait = getenv("OMP_WAIT_POLICY");
    if (getenv(MARK)) { /* the second start: libgomp has read it */
        snprintf(policy, sizeof policy, "GOMP_SPINCOUNT=%s (ember's default)", EMBER_SPINCOUNT);
        unsetenv("GOMP_SPINCOUNT");
        unsetenv(MARK);
        return;
    }
    if (spin || wait) {
        snprintf(policy, sizeof policy, "OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s (the environment's)",
                 wait ? wait : "unset", spin ? spin : "unset");
        return;
    }
    setenv("GOMP_SPINCOUNT", EMBER_SPINCOUNT, 1);
    setenv(MARK, "1", 1);
    execv("/proc/self/exe", argv);
    unsetenv("GOMP_SPINCOUNT"); /* no exec: run on with libgomp's default */
    unsetenv(MARK);
}

const char *cli_wait_policy(void)
{
    return policy;
}
