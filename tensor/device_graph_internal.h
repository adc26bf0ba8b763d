/* A device's queue captured into a graph and replayed (the backend's capture entries): the
 * capture of the calling thread, and hooks that code inside the captured step registers to write
 * what each replay must see anew (the optimizer's learning rate and step counts). The step
 * graph (train/step_graph.h) drives it; optim/ registers its hooks. Not installed. */
#ifndef EMBER_DEVICE_GRAPH_INTERNAL_H
#define EMBER_DEVICE_GRAPH_INTERNAL_H

#include "tensor/tensor_internal.h"

typedef struct em_device_graph em_device_graph;

/* Starts capturing device's queue on the calling thread: until em_device_graph_end, what the
 * thread queues there is kept, not run. NULL + error where the device has no graphs or the
 * capture could not start. */
em_device_graph *em_device_graph_begin(em_device device);
/* Ends the capture: EM_OK with the graph kept, or an error saying why it could not be (then the
 * graph replays nothing, and is still to be freed). */
em_status em_device_graph_end(em_device_graph *g);
/* Runs the hooks in the order they were registered, then queues the graph's work once more. */
em_status em_device_graph_replay(em_device_graph *g);
/* Frees g, calling each hook's drop first. NULL is fine. */
void em_device_graph_free(em_device_graph *g);

/* The graph the calling thread is capturing on device, or NULL. */
em_device_graph *em_device_graph_capturing(em_device device);
/* hook(ctx) before every replay (its error fails the replay), drop(ctx) when g is freed (drop
 * may be NULL): for code inside a captured step whose launches read values a replay must
 * refresh. */
em_status em_device_graph_on_replay(em_device_graph *g, em_status (*hook)(void *ctx),
                                    void (*drop)(void *ctx), void *ctx);

#endif
