/* What one parse holds of the server's budget for requests (em_request_budget, serve/request.h):
 * taken as the parse reads, given back when it ends. Private to serve/. */
#ifndef EMBER_SERVE_REQUEST_BUDGET_H
#define EMBER_SERVE_REQUEST_BUDGET_H

#include "serve/request.h"

/* Takes `bytes` more into *held: EM_OK; EM_ERR_BUSY, with a message saying what the server's
 * parses hold, when that would pass the budget now; EM_ERR_MEMORY when it is more than the whole
 * budget (it never will fit). */
em_status em_request_budget_take_bytes(em_request_budget *held, int64_t bytes);
/* Holds `values` JSON values read in all (taken in chunks as the count grows): EM_OK, or
 * EM_ERR_BUSY as above. */
em_status em_request_budget_take_values(em_request_budget *held, int64_t values);
/* Gives back everything *held holds. */
void em_request_budget_give_back(em_request_budget *held);

#endif
