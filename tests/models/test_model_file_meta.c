/* Whole-model files with more in them: em_model_save_meta keeps the caller's metadata beside the
 * tree and refuses the library's keys; em_model_load passes tensors under "ember." by (a training
 * checkpoint's optimizer state) and still refuses any other tensor the model lacks;
 * em_model_describable says which models em_model_save can describe. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"

static char path[] = "/tmp/ember_model_meta_XXXXXX";

static void make_path(void)
{
    close(mkstemp(path));
}

static void remove_path(void)
{
    unlink(path);
}

TestSuite(model_file_meta, .init = make_path, .fini = remove_path);

static em_module *small_model(void)
{
    em_manual_seed(3);
    em_module *m = em_sequential(3, em_linear_layer(4, 3, true), em_relu_layer(),
                                 em_linear_layer(3, 2, false));
    cr_assert_not_null(m, "%s", em_error());
    return m;
}

Test(model_file_meta, save_meta_keeps_the_callers_entries)
{
    em_module *m = small_model();
    em_st_meta meta[2] = {{"recipe", "mlp"}, {"input_shape", "4"}};
    cr_assert_eq(em_model_save_meta(m, path, meta, 2), EM_OK, "%s", em_error());
    em_safetensors *f = NULL;
    cr_assert_eq(em_safetensors_load_meta(path, &f), EM_OK, "%s", em_error());
    cr_expect_str_eq(em_safetensors_meta(f, "recipe"), "mlp");
    cr_expect_str_eq(em_safetensors_meta(f, "input_shape"), "4");
    cr_expect_not_null(em_safetensors_meta(f, "ember.model"));
    em_safetensors_free(f);
    em_module *back = em_model_load(path);
    cr_assert_not_null(back, "%s", em_error());
    cr_expect_eq(em_module_num_params(back), 4 * 3 + 3 + 3 * 2);
    em_module_free(back);
    em_st_meta reserved = {"ember.model", "{}"};
    cr_expect_eq(em_model_save_meta(m, path, &reserved, 1), EM_ERR_ARG);
    cr_expect(strstr(em_error(), "metadata key 'ember.model' is the library's"), "%s",
              em_error());
    em_error_clear();
    em_module_free(m);
}

/* A file of the tree, the model's tensors and one more: loads when that one is under "ember.",
 * is refused naming the counts otherwise. */
static void save_with_extra(const em_module *m, const char *extra_name)
{
    em_st_entry e[8];
    int n = em_module_state(m, e, 6);
    cr_assert_eq(n, 3);
    em_tensor *extra = em_ones(EM_SHAPE(1000), EM_F32);
    e[n++] = (em_st_entry){extra_name, extra};
    em_st_meta tree;
    cr_assert_eq(em_model_tree_meta(m, path, &tree), EM_OK, "%s", em_error());
    cr_assert_eq(em_safetensors_save(path, e, n, &tree, 1), EM_OK, "%s", em_error());
    free((char *)tree.value);
    em_release(extra);
}

Test(model_file_meta, tensors_under_ember_are_passed_by)
{
    em_module *m = small_model();
    save_with_extra(m, "ember.optim.param.0.exp_avg");
    em_module *back = em_model_load(path);
    cr_assert_not_null(back, "%s", em_error());
    float a[6], b[6];
    em_copy_to_host(m->children[2].module->params[0].value, EM_F32, a);
    em_copy_to_host(back->children[2].module->params[0].value, EM_F32, b);
    cr_expect_eq(memcmp(a, b, sizeof a), 0);
    em_module_free(back);
    save_with_extra(m, "optim.param.0.exp_avg");
    cr_expect_null(em_model_load(path));
    cr_expect(strstr(em_error(), "the file holds 4 tensors, the model 3"), "%s", em_error());
    em_error_clear();
    em_module_free(m);
}

static em_tensor *same_forward(em_module *m, const em_tensor *x)
{
    (void)m;
    return em_mul_scalar(x, 1.0);
}

static const em_module_type unknown_type = {.type_name = "TestUnknown", .forward = same_forward};

Test(model_file_meta, describable_says_what_model_files_know)
{
    em_module *m = small_model();
    cr_expect(em_model_describable(m));
    cr_assert_not_null(em_checkpoint_sequential(m, 2), "%s", em_error());
    cr_expect(em_model_describable(m), "a checkpointed Sequential is saved as a Sequential");
    em_module *unknown = em_module_alloc(sizeof *unknown, &unknown_type);
    em_module *outer = em_sequential(2, m, unknown);
    cr_assert_not_null(outer, "%s", em_error());
    cr_expect(!em_model_describable(outer));
    cr_expect_eq(em_model_save(outer, path), EM_ERR_ARG);
    cr_expect(strstr(em_error(), "module '1' is a TestUnknown"), "%s", em_error());
    em_error_clear();
    em_module_free(outer);
}
