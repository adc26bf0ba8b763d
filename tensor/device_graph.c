/* Graphs of a device's queue: capture on the calling thread, replay with the hooks of the code
 * that ran inside the capture, free. */
#include <stdio.h>
#include <stdlib.h>

#include "tensor/device_graph_internal.h"

typedef struct {
    em_status (*hook)(void *ctx);
    void (*drop)(void *ctx);
    void *ctx;
} replay_hook;

struct em_device_graph {
    em_device device;
    const em_backend *be;
    void *graph; /* the backend's, once kept */
    replay_hook *hooks;
    int n_hooks, cap_hooks;
};

static _Thread_local em_device_graph *capturing[EM_NDEVICES];

/* fn's error for a failed backend call rc: what the device said where it kept that. */
static em_status graph_error(const char *fn, const em_device_graph *g, int rc)
{
    const char *said = g->be->take_failure ? g->be->take_failure() : NULL;
    if (rc == EM_KERNEL_UNSUPPORTED)
        return em_set_error(EM_ERR_UNSUPPORTED, "%s: %s cannot capture a graph", fn,
                            em_device_name(g->device));
    return em_set_error(EM_ERR_STATE, "%s: %s", fn, said ? said : "the device failed");
}

em_device_graph *em_device_graph_begin(em_device device)
{
    static const char fn[] = "em_device_graph_begin";
    const em_backend *be = em_backend_get(device);
    if (!be || !be->capture_begin) {
        em_set_error(EM_ERR_UNSUPPORTED, "%s: %s has no device graphs", fn,
                     em_device_name(device));
        return NULL;
    }
    if (capturing[device]) {
        em_set_error(EM_ERR_STATE, "%s: this thread is capturing a graph on %s already", fn,
                     em_device_name(device));
        return NULL;
    }
    em_device_graph *g = calloc(1, sizeof *g);
    if (!g) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    *g = (em_device_graph){.device = device, .be = be};
    int rc = be->capture_begin();
    if (rc != EM_KERNEL_OK) {
        graph_error(fn, g, rc);
        free(g);
        return NULL;
    }
    capturing[device] = g;
    return g;
}

em_status em_device_graph_end(em_device_graph *g)
{
    capturing[g->device] = NULL;
    int rc = g->be->capture_end(&g->graph);
    return rc == EM_KERNEL_OK ? EM_OK : graph_error("em_device_graph_end", g, rc);
}

em_status em_device_graph_replay(em_device_graph *g)
{
    static const char fn[] = "em_device_graph_replay";
    if (!g->graph)
        return em_set_error(EM_ERR_STATE, "%s: no graph was kept", fn);
    for (int i = 0; i < g->n_hooks; i++) {
        em_status st = g->hooks[i].hook(g->hooks[i].ctx);
        if (st != EM_OK)
            return st;
    }
    int rc = g->be->graph_launch(g->graph);
    return rc == EM_KERNEL_OK ? EM_OK : graph_error(fn, g, rc);
}

void em_device_graph_free(em_device_graph *g)
{
    if (!g)
        return;
    if (capturing[g->device] == g) { /* freed while capturing: end it, keeping nothing */
        capturing[g->device] = NULL;
        void *dropped = NULL;
        if (g->be->capture_end(&dropped) == EM_KERNEL_OK)
            g->be->graph_free(dropped);
    }
    for (int i = 0; i < g->n_hooks; i++)
        if (g->hooks[i].drop)
            g->hooks[i].drop(g->hooks[i].ctx);
    if (g->graph)
        g->be->graph_free(g->graph);
    free(g->hooks);
    free(g);
}

em_device_graph *em_device_graph_capturing(em_device device)
{
    return (unsigned)device < EM_NDEVICES ? capturing[device] : NULL;
}

em_status em_device_graph_on_replay(em_device_graph *g, em_status (*hook)(void *ctx),
                                    void (*drop)(void *ctx), void *ctx)
{
    if (g->n_hooks == g->cap_hooks) {
        int cap = g->cap_hooks ? 2 * g->cap_hooks : 4;
        replay_hook *h = realloc(g->hooks, (size_t)cap * sizeof *h);
        if (!h)
            return em_set_error(EM_ERR_MEMORY, "em_device_graph_on_replay: out of memory");
        g->hooks = h;
        g->cap_hooks = cap;
    }
    g->hooks[g->n_hooks++] = (replay_hook){hook, drop, ctx};
    return EM_OK;
}
