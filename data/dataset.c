/* The dataset interface's checked entry points; each dataset kind lives in its own dataset_*.c. */
#include "data/data.h"

int64_t em_dataset_len(const em_dataset *ds)
{
    if (!ds) {
        em_set_error(EM_ERR_ARG, "em_dataset_len: dataset is NULL");
        return -1;
    }
    return ds->vt->len(ds);
}

em_status em_dataset_get(const em_dataset *ds, int64_t i, void *x, void *y)
{
    if (!ds || !x || !y)
        return em_set_error(EM_ERR_ARG, "em_dataset_get: NULL dataset or buffer");
    int64_t n = ds->vt->len(ds);
    if (i < 0 || i >= n)
        return em_set_error(EM_ERR_ARG, "em_dataset_get: index %lld out of range [0, %lld)",
                            (long long)i, (long long)n);
    return ds->vt->get(ds, i, 0, x, y);
}

void em_dataset_free(em_dataset *ds)
{
    if (ds)
        ds->vt->free(ds);
}
