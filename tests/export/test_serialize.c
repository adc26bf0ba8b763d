/* Loading that matches what it can (PyTorch's strict=False): a backbone's weights go into a
 * model with a new head bit for bit, and the missing, unexpected and mismatched names are
 * reported in order; the strict load refuses the same file; an unreadable file changes nothing. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"

static char path[] = "/tmp/ember_serialize_XXXXXX";

static void setup(void)
{
    em_error_clear();
    em_manual_seed(3);
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    em_scope_begin();
}

static void teardown(void)
{
    em_scope_end();
    unlink(path);
}

TestSuite(serialize, .init = setup, .fini = teardown);

static bool same_bits(const em_tensor *a, const em_tensor *b)
{
    return em_numel(a) == em_numel(b) &&
           !memcmp(em_data_ptr(a), em_data_ptr(b), (size_t)em_numel(a) * sizeof(float));
}

static em_tensor *param(em_module *m, const char *name)
{
    em_param_ref refs[16];
    int n = em_module_parameters(m, refs, 16);
    for (int i = 0; i < n; i++)
        if (!strcmp(refs[i].name, name))
            return refs[i].value;
    cr_assert_fail("no parameter %s", name);
    return NULL;
}

static void expect_names(char **got, int n, const char *const *want, int n_want, const char *what)
{
    cr_assert_eq(n, n_want, "%s: %d names, expected %d", what, n, n_want);
    for (int i = 0; i < n; i++)
        cr_expect_str_eq(got[i], want[i], "%s %d", what, i);
}

Test(serialize, a_backbone_loads_into_a_model_with_a_new_head)
{
    /* the file: a 4-3-2 backbone and a tensor of another model's */
    em_module *saved = em_sequential(3, em_linear_layer(4, 3, true), em_relu_layer(),
                                     em_linear_layer(3, 2, true));
    em_st_entry entries[8];
    int n = em_module_state(saved, entries, 8);
    cr_assert_eq(n, 4);
    entries[n++] = (em_st_entry){.name = "head.scale", .tensor = em_ones(EM_SHAPE(1), EM_F32)};
    cr_assert_eq(em_safetensors_save(path, entries, n, NULL, 0), EM_OK, "%s", em_error());
    /* the model: the same first layer, a wider second, a third the file lacks */
    em_module *m = em_sequential(5, em_linear_layer(4, 3, true), em_relu_layer(),
                                 em_linear_layer(3, 5, true), em_relu_layer(),
                                 em_linear_layer(5, 1, true));
    em_tensor *w2_before = em_clone(param(m, "2.weight"));
    cr_assert_eq(em_module_load(m, path), EM_ERR_ARG, "the strict load refuses it");
    em_error_clear();
    em_load_report r;
    cr_assert_eq(em_module_load_matching(m, path, &r), EM_OK, "%s", em_error());
    cr_expect(same_bits(param(m, "0.weight"), param(saved, "0.weight")));
    cr_expect(same_bits(param(m, "0.bias"), param(saved, "0.bias")));
    cr_expect(same_bits(param(m, "2.weight"), w2_before), "a mismatched tensor is left alone");
    expect_names(r.missing, r.n_missing, (const char *[]){"4.weight", "4.bias"}, 2, "missing");
    expect_names(r.mismatched, r.n_mismatched, (const char *[]){"2.weight", "2.bias"}, 2,
                 "mismatched");
    expect_names(r.unexpected, r.n_unexpected, (const char *[]){"head.scale"}, 1,
                 "unexpected");
    em_load_report_free(&r);
    cr_expect_eq(r.n_missing, 0);
    em_module_free(m);
    em_module_free(saved);
}

Test(serialize, an_unreadable_file_changes_nothing)
{
    em_module *m = em_linear_layer(4, 3, true);
    em_tensor *before = em_clone(param(m, "weight"));
    FILE *f = fopen(path, "wb");
    fputs("not a safetensors file", f);
    fclose(f);
    em_load_report r = {0};
    cr_assert_eq(em_module_load_matching(m, path, &r), EM_ERR_IO);
    cr_expect(strstr(em_error(), path), "%s", em_error());
    em_error_clear();
    cr_expect(same_bits(param(m, "weight"), before));
    cr_expect(r.n_missing == 0 && !r.missing, "the report is untouched");
    em_module_free(m);
}
