/* The loader handing out batches on a device: with pin_memory the rows are copied from
 * page-locked host slots beside the kernels into two reused buffers; every batch equals the plain
 * CPU loader's, for any worker count, over epochs and a last partial batch; a batch the caller
 * keeps stays intact while later batches arrive. The buffer reuse is checked on the CPU too; the
 * GPU half is skipped where no GPU is present. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "ember.h"

TestSuite(cuda_loader, .init = em_scope_begin, .fini = em_scope_end);

#define N 103 /* samples: 103 = 6 batches of 16 and one of 7 */

static em_dataset *numbers(void)
{
    em_tensor *x = em_reshape(em_arange(0, N * 3, 1, EM_F32), EM_SHAPE(N, 3));
    em_tensor *y = em_arange(0, N, 1, EM_I64);
    return em_tensor_dataset(x, y);
}

Test(cuda_loader, a_missing_device_is_named)
{
    if (em_device_available(EM_CUDA))
        cr_skip_test("a CUDA device is present: the missing-device path does not apply");
    em_dataset *ds = numbers();
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 16, .device = EM_CUDA,
                                                       .pin_memory = true});
    cr_assert_null(dl);
    cr_assert_str_eq(em_error(), "em_loader_new: device cuda is not available");
    em_error_clear();
    em_dataset_free(ds);
}

/* The values of t (any device) as f64 on the host. */
static double *values(const em_tensor *t)
{
    double *v = malloc((size_t)em_numel(t) * sizeof *v);
    cr_assert_eq(em_copy_to_host(t, EM_F64, v), EM_OK, "%s", em_error());
    return v;
}

static void same_batches(em_device device, int workers, bool pin)
{
    em_dataset *ds = numbers();
    em_loader_opts o = {.batch_size = 16, .shuffle = true, .seed = 5, .num_workers = workers};
    em_loader *cpu = em_loader_new(ds, o);
    o.device = device;
    o.pin_memory = pin;
    em_loader *gpu = em_loader_new(ds, o);
    cr_assert(cpu && gpu, "%s", em_error());
    em_tensor *kept = NULL;
    double *kept_values = NULL;
    for (int epoch = 0; epoch < 2; epoch++) {
        for (int b = 0;; b++) {
            em_batch bc, bg;
            em_status sc = em_loader_next(cpu, &bc), sg = em_loader_next(gpu, &bg);
            cr_assert_eq(sc, sg, "epoch %d batch %d: %s", epoch, b, em_error());
            if (sc == EM_END)
                break;
            cr_assert_eq(bg.x->device, device);
            cr_assert(em_same_shape(bc.x, bg.x) && em_same_shape(bc.y, bg.y));
            double *a = values(bc.x), *g = values(bg.x), *ay = values(bc.y), *gy = values(bg.y);
            for (int64_t i = 0; i < em_numel(bc.x); i++)
                cr_assert_eq(a[i], g[i], "epoch %d batch %d x[%lld]", epoch, b, (long long)i);
            for (int64_t i = 0; i < em_numel(bc.y); i++)
                cr_assert_eq(ay[i], gy[i], "epoch %d batch %d y[%lld]", epoch, b, (long long)i);
            if (epoch == 0 && b == 1) { /* kept by the caller through what follows */
                kept = em_keep(em_retain(bg.x));
                kept_values = g;
            } else {
                free(g);
            }
            free(a);
            free(ay);
            free(gy);
            em_release(bc.x), em_release(bc.y), em_release(bg.x), em_release(bg.y);
        }
    }
    double *now = values(kept);
    for (int64_t i = 0; i < em_numel(kept); i++)
        cr_assert_eq(now[i], kept_values[i], "a kept batch changed at %lld", (long long)i);
    free(now);
    free(kept_values);
    em_release(kept);
    em_loader_free(cpu);
    em_loader_free(gpu);
    em_dataset_free(ds);
}

/* the feed's buffer reuse on the CPU, where its copies complete at once */
Test(cuda_loader, pinned_batches_on_the_cpu_equal_plain_ones)
{
    same_batches(EM_CPU, 0, true);
    same_batches(EM_CPU, 2, true);
}

Test(cuda_loader, batches_on_the_gpu_equal_the_cpus)
{
    if (!em_device_available(EM_CUDA))
        cr_skip_test("no CUDA device (or ember built without CUDA): CUDA test skipped");
    same_batches(EM_CUDA, 0, true);
    same_batches(EM_CUDA, 2, true);
    same_batches(EM_CUDA, 2, false);
}
