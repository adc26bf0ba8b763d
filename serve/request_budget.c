/* The server's budget for requests being parsed (see serve/request.h): two counters the parses of
 * the whole process share, each taken by compare-and-swap only while it stays within its limit,
 * so a request that does not fit is refused at once and never waits. */
#include <stdatomic.h>

#include "serve/request_budget.h"

#define VALUE_CHUNK 4096 /* values are taken this many at a time */

static _Atomic int64_t in_flight_bytes, in_flight_values;
static _Atomic int64_t max_bytes = EM_REQUEST_BUDGET_BYTES, max_values = EM_REQUEST_BUDGET_VALUES;

em_request_budget em_request_budget_set(em_request_budget b)
{
    em_request_budget old = {atomic_load(&max_bytes), atomic_load(&max_values)};
    atomic_store(&max_bytes, b.bytes > 0 ? b.bytes : EM_REQUEST_BUDGET_BYTES);
    atomic_store(&max_values, b.values > 0 ? b.values : EM_REQUEST_BUDGET_VALUES);
    return old;
}

em_request_budget em_request_budget_in_flight(void)
{
    return (em_request_budget){atomic_load(&in_flight_bytes), atomic_load(&in_flight_values)};
}

/* Adds n to *counter unless that passes *limit; false (nothing added) when it would. */
static bool take(_Atomic int64_t *counter, const _Atomic int64_t *limit, int64_t n)
{
    int64_t now = atomic_load(counter);
    do {
        if (now > atomic_load(limit) - n)
            return false;
    } while (!atomic_compare_exchange_weak(counter, &now, now + n));
    return true;
}

/* Takes n more of counter into *held: EM_OK, or EM_ERR_BUSY saying how much of `what` the
 * server's parses hold. */
static em_status take_into(_Atomic int64_t *counter, const _Atomic int64_t *limit, int64_t n,
                           int64_t *held, const char *what)
{
    if (!take(counter, limit, n))
        return em_set_error(EM_ERR_BUSY, "the server is reading %lld %s of requests already (at "
                            "most %lld at once); try again", (long long)atomic_load(counter),
                            what, (long long)atomic_load(limit));
    *held += n;
    return EM_OK;
}

em_status em_request_budget_take_bytes(em_request_budget *held, int64_t bytes)
{
    if (bytes <= 0)
        return EM_OK;
    if (bytes > atomic_load(&max_bytes))
        return em_set_error(EM_ERR_MEMORY, "a request of %lld bytes is more than the server reads "
                            "at once (%lld)", (long long)bytes, (long long)atomic_load(&max_bytes));
    return take_into(&in_flight_bytes, &max_bytes, bytes, &held->bytes, "bytes");
}

em_status em_request_budget_take_values(em_request_budget *held, int64_t values)
{
    if (values <= held->values)
        return EM_OK;
    int64_t more = (values - held->values + VALUE_CHUNK - 1) / VALUE_CHUNK * VALUE_CHUNK;
    return take_into(&in_flight_values, &max_values, more, &held->values, "JSON values");
}

void em_request_budget_give_back(em_request_budget *held)
{
    atomic_fetch_sub(&in_flight_bytes, held->bytes);
    atomic_fetch_sub(&in_flight_values, held->values);
    *held = (em_request_budget){0};
}
