/* Errors, sticky and thread-local: a failing op returns NULL (or a status) and records a message
 * naming the function and the shapes; ops given NULL pass it on and keep the first message. */
#ifndef EMBER_ERROR_H
#define EMBER_ERROR_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    EM_OK = 0,
    EM_END,             /* not an error: iteration finished (data loaders) */
    EM_ERR_ARG,         /* bad argument: shape, dtype, device, NULL, range */
    EM_ERR_MEMORY,      /* allocation failed or the memory budget was exceeded */
    EM_ERR_UNSUPPORTED, /* not implemented for this dtype or device */
    EM_ERR_IO,          /* file missing, unreadable, truncated or corrupt */
    EM_ERR_STATE,       /* called at the wrong time (backward twice, ...) */
    EM_ERR_NUMERIC,     /* a NaN or Inf where none is allowed */
    EM_ERR_TIMEOUT,     /* waited longer than allowed (a loader batch, a collective) */
    EM_ERR_BUSY,        /* a bounded queue is full: try again later */
    EM_ERR_CANCELLED,   /* the request was cancelled before it ran */
    EM_ERR_PEER,        /* another process of a distributed run failed */
    EM_SKIP             /* not an error: a sample that cannot be read, left out of its batch */
} em_status;

/* The first error message since the last em_error_clear(), or "" when none. */
const char *em_error(void);
/* The status of that first error, EM_OK when none. */
em_status em_error_status(void);
bool em_has_error(void);
void em_error_clear(void);

/* Puts "prefix: " before the pending error's message (nothing when none is pending) and returns
 * its status: a caller naming itself in an error that a lower call recorded. */
em_status em_error_prefix(const char *prefix);

/* Record an error (kept only if none is pending) and return status; for library code. */
em_status em_set_error(em_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* True when p is not NULL. Otherwise records "fn: NAME is NULL" (EM_ERR_ARG) unless an error
 * is pending (a NULL passed on from a failed op keeps that op's message) and returns false. */
bool em_present(const void *p, const char *fn, const char *name);
/* True when count >= 0 and p is not NULL or count is 0: an array and its length as a caller
 * passed them. Otherwise records "fn: NAME is NULL with COUNT_NAME N" or "fn: COUNT_NAME is N,
 * negative" (EM_ERR_ARG) and returns false. */
bool em_array_present(const void *p, int64_t count, const char *fn, const char *name,
                      const char *count_name);

#ifdef __cplusplus
}
#endif

#endif
