/* Running sums and products along one dim on the CPU (cumsum, cumprod and the reverse sum their
 * gradients take): each line of in along dim, in double, one element after the other. */
#include "backend/kernel_args_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_strided_internal.h"

typedef struct {
    bool prod;
    em_dtype dt;
    int64_t len;                 /* the line's length */
    int64_t step_out, step_in;   /* the line's strides in elements, negated for reverse */
    int64_t start_out, start_in; /* where the walk starts: 0, or the last element for reverse */
} line_ctx;

/* operands: 0 = out, 1 = in, each at a line's element 0; the run visits n lines */
static void run_lines(void *vctx, int64_t n, char *const *p, const int64_t *s)
{
    const line_ctx *c = vctx;
    const int64_t es = (int64_t)em_dtype_size(c->dt);
    for (int64_t l = 0; l < n; l++) {
        char *out = p[0] + (l * s[0] + c->start_out) * es;
        const char *in = p[1] + (l * s[1] + c->start_in) * es;
        double acc = c->prod ? 1 : 0, buf[EM_STAGE_BLOCK];
        for (int64_t i = 0; i < c->len; i += EM_STAGE_BLOCK) {
            const int64_t m = c->len - i < EM_STAGE_BLOCK ? c->len - i : EM_STAGE_BLOCK;
            em_load_f64(c->dt, in + i * c->step_in * es, c->step_in, m, buf);
            for (int64_t k = 0; k < m; k++) {
                acc = c->prod ? acc * buf[k] : acc + buf[k];
                buf[k] = acc;
            }
            em_store_f64(c->dt, out + i * c->step_out * es, c->step_out, m, buf);
        }
    }
}

int em_cpu_cumulative(bool prod, bool reverse, int dim, const em_arr *out, const em_arr *in)
{
    if (!em_cumulative_args_ok(out, in, dim))
        return EM_KERNEL_UNSUPPORTED;
    const int64_t len = out->shape[dim];
    line_ctx c = {prod, out->dtype, len, out->strides[dim], in->strides[dim], 0, 0};
    if (reverse) {
        c.start_out = (len - 1) * c.step_out;
        c.start_in = (len - 1) * c.step_in;
        c.step_out = -c.step_out;
        c.step_in = -c.step_in;
    }
    em_arr lo = *out, li = *in; /* one position per line: dim as size 1 */
    lo.shape[dim] = li.shape[dim] = 1;
    em_iter it;
    em_iter_init(&it, lo.ndim, lo.shape, 2, (const em_arr *[]){&lo, &li}, 0);
    if (len > 0 && it.numel > 0)
        em_iter_run(&it, len, run_lines, &c);
    return EM_KERNEL_OK;
}
