/* Moving tensors and modules between devices in place: what may move, the errors, and (where a
 * GPU is present) that a moved module computes what it computed on the CPU. */
#include <criterion/criterion.h>
#include <math.h>

#include "ember.h"

TestSuite(device_move, .init = em_scope_begin, .fini = em_scope_end);

static bool have_cuda(void)
{
    em_tensor *probe = em_empty_on(EM_SHAPE(1), EM_F32, EM_CUDA);
    em_error_clear();
    em_release(probe);
    return probe != NULL;
}

Test(device_move, only_whole_leaves_move_in_place)
{
    em_tensor *t = em_arange(0, 12, 1, EM_F32);
    cr_assert_eq(em_to_device_(t, EM_CPU), EM_OK, "same device is a no-op");
    em_tensor *v = em_reshape(t, EM_SHAPE(3, 4));
    em_tensor *s = em_slice(v, 0, 1, 3, 1);
    cr_assert_neq(em_to_device_(s, EM_CUDA), EM_OK);
    cr_assert(strstr(em_error(), "em_to_device_: only a leaf that owns its whole storage"),
              "%s", em_error());
    em_error_clear();
}

Test(device_move, a_missing_device_moves_nothing)
{
    if (have_cuda())
        cr_skip_test("a CUDA device is present: the missing-device path does not apply");
    em_module *net = em_sequential(2, em_linear_layer(4, 3, true), em_relu_layer());
    cr_assert_neq(em_module_to(net, EM_CUDA), EM_OK);
    cr_assert_str_eq(em_error(), "em_module_to: no cuda device is available (ember was built "
                     "without its backend, or no device and driver were found)");
    em_error_clear();
    em_param_ref ps[4];
    int n = em_module_parameters(net, ps, 4);
    for (int i = 0; i < n; i++)
        cr_assert_eq(ps[i].value->device, EM_CPU);
    em_module_free(net);
}

Test(device_move, moved_module_computes_the_same)
{
    if (!have_cuda())
        cr_skip_test("no CUDA device (or ember built without CUDA): CUDA test skipped");
    em_manual_seed(3);
    em_module *net = em_sequential(3, em_linear_layer(6, 5, true), em_relu_layer(),
                                   em_linear_layer(5, 2, true));
    em_tensor *x = em_randn(EM_SHAPE(4, 6), EM_F32, NULL);
    em_tensor *want = em_forward(net, x);
    em_tensor *w0 = em_module_find(net, "0.weight");
    cr_assert_eq(em_module_to(net, EM_CUDA), EM_OK, "%s", em_error());
    cr_assert_eq(w0->device, EM_CUDA, "the held tensor moved with the module");
    em_tensor *got = em_to_device(em_forward(net, em_to_device(x, EM_CUDA)), EM_CPU);
    cr_assert(got, "%s", em_error());
    float a[8], b[8];
    em_copy_to_host(want, EM_F32, a);
    em_copy_to_host(got, EM_F32, b);
    for (int i = 0; i < 8; i++)
        cr_assert(fabsf(a[i] - b[i]) <= 1e-5f * (1 + fabsf(a[i])), "%d: %g vs %g", i, b[i], a[i]);
    cr_assert_eq(em_module_to(net, EM_CPU), EM_OK, "%s", em_error());
    cr_assert_eq(w0->device, EM_CPU);
    em_module_free(net);
}
