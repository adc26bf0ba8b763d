/* Autocast's low-precision copies of parameters, kept from one step to the next: what optim/
 * registers and writes, and what the ops take under autocast. Not installed. */
#ifndef EMBER_AUTOCAST_COPIES_INTERNAL_H
#define EMBER_AUTOCAST_COPIES_INTERNAL_H

#include "tensor/tensor_internal.h"

/* An optimizer's parameter, registered when the optimizer takes it and dropped when it lets it
 * go (registrations count: two optimizers may hold one parameter). Only a registered f32
 * parameter gets a kept copy; em_autocast_copy_drop frees its copy with the last registration. */
em_status em_autocast_copy_register(const em_tensor *param);
void em_autocast_copy_drop(const em_tensor *param);

/* What autocast's ops cast an f32 tensor to dtype with: a registered parameter's kept copy
 * (made now when it has none, or none that holds the parameter's bytes as they are), a plain
 * cast (a temporary of the current scope) for anything else; NULL with an error when out of
 * memory. A kept copy belongs to the cache: the caller retains it to keep it. */
const em_tensor *em_autocast_weight(const em_tensor *t, em_dtype dtype);

/* For an optimizer's update of param: the kept copy it should write in the same pass (the
 * update rounds the new values into it), or NULL when there is none to write. A copy no
 * autocast region took since the last update is freed here instead: autocast has ended for it.
 * em_autocast_copy_written then says the update wrote it (param's storage was touched). */
em_tensor *em_autocast_copy_to_write(const em_tensor *param);
void em_autocast_copy_written(const em_tensor *param);

/* Kept copies held now, and their bytes (for tests and memory accounts). */
typedef struct {
    int copies;
    size_t bytes;
} em_autocast_copy_stats;
em_autocast_copy_stats em_autocast_copy_get_stats(void);

#endif
