/* libFuzzer target: the inference server's JSON request parser on arbitrary bytes, against a
 * 2-D sample shape; any input must give EM_OK with a tensor of that shape (or a batch of them)
 * or EM_ERR_ARG with a message, never a crash, a leak or a read past the body. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes, so ASan sees any read past the body */
    char *body = malloc(size ? size : 1);
    if (!body)
        return 0;
    memcpy(body, data, size);
    em_predict_request r;
    char err[256];
    em_status st = em_predict_request_parse(body, size, EM_SHAPE(3, 4), &r, err, sizeof err);
    assert(st == EM_OK || st == EM_ERR_ARG || st == EM_ERR_MEMORY);
    if (st == EM_OK) {
        int lead = r.n_instances ? 1 : 0; /* a batch of instances: (n, 3, 4) */
        assert(r.input && r.input->ndim == 2 + lead && r.input->shape[lead] == 3 &&
               r.input->shape[lead + 1] == 4);
        assert(!lead || r.input->shape[0] == r.n_instances);
        em_release(r.input);
    } else {
        assert(!r.input && err[0]);
    }
    free(body);
    return 0;
}
