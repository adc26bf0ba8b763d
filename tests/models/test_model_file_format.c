/* Whole-model files written by an earlier ember (tests/models/fixtures/, saved by the version
 * before module types described their own settings): every built-in type loads, saves again to
 * the same "ember.model" text byte for byte, and a CNN and an MLP give the outputs stored beside
 * them bit for bit. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "helpers/files.h"

TestSuite(model_file_format, .init = em_test_dir_init, .fini = em_test_dir_fini);

static const char *fixture(const char *name)
{
    static char path[512];
    const char *src = getenv("EMBER_SOURCE_DIR");
    cr_assert_not_null(src, "EMBER_SOURCE_DIR is not set");
    snprintf(path, sizeof path, "%s/tests/models/fixtures/%s", src, name);
    return path;
}

/* The "ember.model" text of the file at path, in a new string. */
static char *tree_text(const char *path)
{
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load(path, &st), EM_OK, "%s", em_error());
    const char *text = em_safetensors_meta(st, "ember.model");
    cr_assert_not_null(text);
    char *copy = strdup(text);
    em_safetensors_free(st);
    return copy;
}

/* The fixture loads and saves again to the same tree text and the same tensors. */
static void assert_saves_same(const char *name)
{
    em_module *m = em_model_load(fixture(name));
    cr_assert_not_null(m, "%s: %s", name, em_error());
    const char *again = em_test_path("again.safetensors");
    cr_assert_eq(em_model_save(m, again), EM_OK, "%s", em_error());
    char *want = tree_text(fixture(name)), *got = tree_text(again);
    cr_assert_str_eq(got, want);
    free(want);
    free(got);
    em_safetensors *a = NULL, *b = NULL;
    cr_assert_eq(em_safetensors_load(fixture(name), &a), EM_OK, "%s", em_error());
    cr_assert_eq(em_safetensors_load(again, &b), EM_OK, "%s", em_error());
    cr_assert_eq(a->n_tensors, b->n_tensors);
    for (int i = 0; i < a->n_tensors; i++) {
        const em_tensor *t = em_safetensors_get(b, a->names[i]);
        cr_assert_not_null(t, "'%s' not saved again", a->names[i]);
        cr_assert(em_tensor_hash(t) == em_tensor_hash(a->tensors[i]), "'%s' differs",
                  a->names[i]);
    }
    em_safetensors_free(a);
    em_safetensors_free(b);
    em_module_free(m);
}

Test(model_file_format, every_type_saves_the_same_tree)
{
    assert_saves_same("every_type.safetensors");
    assert_saves_same("cnn.safetensors");
    assert_saves_same("mlp.safetensors");
}

/* The loaded model's output on the stored input, bit for bit the stored output. */
static void assert_same_forward(const char *name, const char *x_name, const char *y_name)
{
    em_module *m = em_model_load(fixture(name));
    cr_assert_not_null(m, "%s: %s", name, em_error());
    cr_assert(!m->training);
    em_safetensors *io = NULL;
    cr_assert_eq(em_safetensors_load(fixture("forward.safetensors"), &io), EM_OK, "%s",
                 em_error());
    em_scope_begin();
    em_tensor *y = em_forward(m, em_safetensors_get(io, x_name));
    const em_tensor *want = em_safetensors_get(io, y_name);
    cr_assert(y && want && em_same_shape(y, want), "%s", em_error());
    float got_v[64], want_v[64];
    cr_assert_leq(em_numel(y), 64);
    em_copy_to_host(y, EM_F32, got_v);
    em_copy_to_host(want, EM_F32, want_v);
    cr_assert_eq(memcmp(got_v, want_v, sizeof(float) * (size_t)em_numel(y)), 0,
                 "%s: outputs differ", name);
    em_scope_end();
    em_safetensors_free(io);
    em_module_free(m);
}

Test(model_file_format, cnn_and_mlp_give_the_stored_outputs)
{
    assert_same_forward("cnn.safetensors", "cnn.x", "cnn.y");
    assert_same_forward("mlp.safetensors", "mlp.x", "mlp.y");
}
