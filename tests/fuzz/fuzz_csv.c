/* libFuzzer target: numeric CSV files read by em_csv_dataset and every sample read back. The
 * first input byte picks the options (header mode, label column, regression, delimiter), the rest
 * is the file. Any input must load or fail with a message naming what was wrong, never crash or
 * leak. */
#include <assert.h>
#include <stdint.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned b = data[0];
    static const int label_cols[] = {-1, 0, 1, -2};
    em_csv_opts o = {.header = (em_csv_header)(b % 3), .label_col = label_cols[(b >> 2) & 3],
                     .regression = (b >> 4) & 1, .delimiter = (b >> 5) & 1 ? ';' : 0};
    const char *path = fuzz_input_file(0, data + 1, size - 1);
    em_error_clear();
    em_dataset *ds = em_csv_dataset(path, o);
    if (ds)
        fuzz_read_samples(ds, 256);
    else
        assert(em_error()[0]);
    em_error_clear();
    return 0;
}
