/* Pruning: each method's mask against hand-computed expectations (ties, rounding, repeated
 * pruning), masks through optimizer steps, remove, the sparsity report, shrinking against the
 * masked model, and saving and loading pruned and shrunk models. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"

static void set_values(em_tensor *t, const float *v)
{
    em_tensor *src = em_from_data(em_shape_of(t), EM_F32, v);
    cr_assert_eq(em_copy_(t, src), EM_OK, "%s", em_error());
    em_release(src);
}

static void host(const em_tensor *t, float *out)
{
    cr_assert_not_null(t, "%s", em_error());
    cr_assert_eq(em_copy_to_host(t, EM_F32, out), EM_OK, "%s", em_error());
}

static void expect_mask(const em_module *m, const float *want, int n)
{
    float got[64];
    host(em_prune_mask(m, "weight"), got);
    for (int i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "mask[%d] = %g, want %g", i, got[i], want[i]);
}

static em_module *linear_with(int64_t in, int64_t out, const float *w)
{
    em_module *l = em_linear_layer(in, out, true);
    set_values(l->params[0].value, w);
    return l;
}

static const float w24[8] = {0.1f, -0.5f, 0.3f, 0.0f, 0.2f, -0.1f, 0.7f, -0.3f};

Test(prune, l1_unstructured_ties_go_to_the_lower_index)
{
    em_module *l = linear_with(4, 2, w24);
    cr_assert_eq(em_prune_l1_unstructured(l, "weight", 0.625), EM_OK, "%s", em_error());
    /* 5 of 8: 0.0 (3), 0.1 (0), 0.1 (5), 0.2 (4), then 0.3 at 2 before 0.3 at 7 */
    float want[8] = {0, 1, 0, 0, 0, 0, 1, 1};
    expect_mask(l, want, 8);
    cr_assert_str_eq(l->params[0].name, "weight_orig");
    cr_assert_str_eq(l->buffers[0].name, "weight_mask");
    cr_assert_str_eq(l->type->type_name, "Linear");
    cr_assert(em_prune_is_pruned(l));
    float orig[8];
    host(l->params[0].value, orig); /* the original values stay, as in PyTorch */
    for (int i = 0; i < 8; i++)
        cr_assert_eq(orig[i], w24[i]);
    em_module_free(l);
}

Test(prune, repeated_pruning_applies_to_what_remains)
{
    em_module *l = linear_with(4, 2, w24);
    cr_assert_eq(em_prune_l1_unstructured(l, "weight", 0.5), EM_OK);
    float first[8] = {0, 1, 1, 0, 0, 0, 1, 1};
    expect_mask(l, first, 8);
    cr_assert_eq(em_prune_l1_unstructured(l, "weight", 0.5), EM_OK); /* 2 of the 4 left */
    float second[8] = {0, 1, 0, 0, 0, 0, 1, 0};
    expect_mask(l, second, 8);
    cr_assert_eq(em_prune_l1_unstructured(l, "weight", 0.25), EM_OK); /* round(0.5) = 0 */
    expect_mask(l, second, 8);
    cr_assert_eq(l->n_buffers, 1);
    em_module_free(l);
}

Test(prune, forward_uses_the_masked_weight)
{
    em_module *l = linear_with(4, 2, w24);
    set_values(l->params[1].value, (float[]){0.5f, -1.0f});
    cr_assert_eq(em_prune_l1_unstructured(l, "weight", 0.625), EM_OK);
    em_tensor *x = em_from_data(EM_SHAPE(1, 4), EM_F32, (float[]){1, 2, 3, 4});
    float y[2];
    em_tensor *yt = em_forward(l, x);
    host(yt, y);
    cr_assert_float_eq(y[0], -0.5f * 2 + 0.5f, 1e-6);
    cr_assert_float_eq(y[1], 0.7f * 3 - 0.3f * 4 - 1.0f, 1e-6);
    em_release(yt);
    em_release(x);
    em_module_free(l);
}

static const float w34[12] = {1, 1, 1, 1, 3, 0, 0, 0, 2, 2, 0, 0};

static void structured_case(double n, int dim, double amount, const float *want)
{
    em_module *l = linear_with(4, 3, w34);
    cr_assert_eq(em_prune_ln_structured(l, "weight", amount, n, dim), EM_OK, "%s", em_error());
    expect_mask(l, want, 12);
    em_module_free(l);
}

Test(prune, ln_structured_by_norm_order_and_dim)
{
    /* rows: L1 4, 3, 4; L2 2, 3, 2.83; Linf 1, 3, 2; L0 4, 1, 2; L-inf 1, 0, 0 */
    float drop_r0[12] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    float drop_r1[12] = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1};
    structured_case(1, 0, 1.0 / 3, drop_r1);
    structured_case(2, 0, 1.0 / 3, drop_r0);
    structured_case(INFINITY, 0, 1.0 / 3, drop_r0);
    structured_case(0, 0, 1.0 / 3, drop_r1);
    structured_case(-INFINITY, 0, 1.0 / 3, drop_r1); /* tie 0, 0: the lower index */
    /* columns, L1 6, 3, 1, 1: one goes (the tie to column 2), then two */
    float drop_c2[12] = {1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1};
    structured_case(1, 1, 0.25, drop_c2);
    structured_case(1, -1, 0.25, drop_c2);
    float drop_c23[12] = {1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0};
    structured_case(1, 1, 0.5, drop_c23);
}

Test(prune, ln_structured_repeated_counts_remaining_channels)
{
    em_module *l = linear_with(4, 3, w34);
    cr_assert_eq(em_prune_ln_structured(l, "weight", 1.0 / 3, 2, 0), EM_OK);
    cr_assert_eq(em_prune_ln_structured(l, "weight", 0.5, 2, 0), EM_OK); /* 1 of the 2 left */
    float want[12] = {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0};
    expect_mask(l, want, 12);
    em_module_free(l);
}

Test(prune, random_methods_prune_the_right_counts)
{
    em_generator g = em_generator_new(42), *gen = &g;
    em_module *l = em_linear_layer(10, 10, false);
    cr_assert_eq(em_prune_random_unstructured(l, "weight", 0.3, gen), EM_OK, "%s", em_error());
    float m1[100], m2[100];
    host(em_prune_mask(l, "weight"), m1);
    int z1 = 0, z2 = 0;
    for (int i = 0; i < 100; i++)
        z1 += m1[i] == 0;
    cr_assert_eq(z1, 30);
    cr_assert_eq(em_prune_random_unstructured(l, "weight", 0.5, gen), EM_OK);
    host(em_prune_mask(l, "weight"), m2);
    for (int i = 0; i < 100; i++) {
        z2 += m2[i] == 0;
        cr_assert(m1[i] != 0 || m2[i] == 0, "entry %d came back", i);
    }
    cr_assert_eq(z2, 65);
    em_module_free(l);

    l = em_linear_layer(5, 6, true);
    cr_assert_eq(em_prune_random_structured(l, "weight", 0.5, 0, gen), EM_OK);
    host(em_prune_mask(l, "weight"), m1);
    int rows = 0;
    for (int r = 0; r < 6; r++) {
        int z = 0;
        for (int c = 0; c < 5; c++)
            z += m1[r * 5 + c] == 0;
        cr_assert(z == 0 || z == 5);
        rows += z == 5;
    }
    cr_assert_eq(rows, 3);
    em_module_free(l);
}

Test(prune, global_unstructured_ranks_across_layers)
{
    em_module *a = linear_with(4, 1, (float[]){0.5f, -0.1f, 0.4f, 0.2f});
    em_module *b = linear_with(2, 2, (float[]){0.3f, -0.05f, 0.6f, 0.15f});
    em_prune_target t[2] = {{a, "weight"}, {b, "weight"}};
    cr_assert_eq(em_prune_global_unstructured(t, 2, EM_PRUNE_L1, 0.5, NULL), EM_OK, "%s",
                 em_error());
    /* 4 of 8: 0.05 (b), 0.1 (a), 0.15 (b), 0.2 (a) */
    expect_mask(a, (float[]){1, 0, 1, 0}, 4);
    expect_mask(b, (float[]){1, 0, 1, 0}, 4);
    cr_assert_eq(em_prune_global_unstructured(t, 2, EM_PRUNE_L1, 0.25, NULL), EM_OK);
    /* 1 of the 4 left: 0.3 in b */
    expect_mask(b, (float[]){0, 0, 1, 0}, 4);
    expect_mask(a, (float[]){1, 0, 1, 0}, 4);
    em_module_free(a);
    em_module_free(b);
}

Test(prune, custom_mask_combines_and_remove_bakes_it)
{
    em_module *l = linear_with(4, 2, w24);
    em_tensor *orig = l->params[0].value;
    em_tensor *m1 = em_from_data(EM_SHAPE(2, 4), EM_F32, (float[]){1, 0, 1, 1, 1, 1, 0, 1});
    em_tensor *m2 = em_from_data(EM_SHAPE(2, 4), EM_F32, (float[]){0, 1, 1, 1, 1, 1, 1, 1});
    cr_assert_eq(em_prune_custom_from_mask(l, "weight", m1), EM_OK, "%s", em_error());
    cr_assert_eq(em_prune_custom_from_mask(l, "weight", m2), EM_OK);
    expect_mask(l, (float[]){0, 0, 1, 1, 1, 1, 0, 1}, 8);
    cr_assert_eq(em_prune_remove(l, "weight"), EM_OK, "%s", em_error());
    cr_assert(!em_prune_is_pruned(l));
    cr_assert_str_eq(l->params[0].name, "weight");
    cr_assert_eq(l->params[0].value, orig, "remove keeps the tensor an optimizer holds");
    cr_assert_eq(l->n_buffers, 0);
    float w[8];
    host(orig, w);
    float want[8] = {0, 0, 0.3f, 0, 0.2f, -0.1f, 0, -0.3f};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(w[i], want[i]);
    cr_assert_neq(em_prune_remove(l, "weight"), EM_OK);
    em_error_clear();
    em_release(m1);
    em_release(m2);
    em_module_free(l);
}

Test(prune, bad_arguments_are_errors)
{
    em_module *l = em_linear_layer(3, 2, true);
    cr_assert_eq(em_prune_l1_unstructured(l, "weight", 1.5), EM_ERR_ARG);
    em_error_clear();
    cr_assert_eq(em_prune_l1_unstructured(l, "nothing", 0.5), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "nothing"), "%s", em_error());
    em_error_clear();
    cr_assert_eq(em_prune_ln_structured(l, "weight", 0.5, 2, 2), EM_ERR_ARG);
    em_error_clear();
    cr_assert_eq(em_prune_ln_structured(l, "weight", 0.5, -1, 0), EM_ERR_ARG);
    em_error_clear();
    em_tensor *bad = em_ones(EM_SHAPE(3, 2), EM_F32);
    cr_assert_eq(em_prune_custom_from_mask(l, "weight", bad), EM_ERR_ARG);
    em_error_clear();
    cr_assert(!em_prune_is_pruned(l));
    cr_assert_eq(em_prune_collect_targets(l, NULL, 0), 1);
    cr_assert_eq(em_prune_collect_targets(l, NULL, 4), -1);
    cr_assert_str_eq(em_error(), "em_prune_collect_targets: out is NULL with max 4");
    em_error_clear();
    em_release(bad);
    em_module_free(l);
}

/* Pruning renames weight to weight_orig and adds weight_mask; removing it undoes both. A module
 * with many names (checked through a hash table) sees each rename. */
Test(prune, renames_are_seen_by_a_module_with_many_names)
{
    em_module *l = em_linear_layer(4, 2, true);
    char name[16];
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof name, "extra%d", i);
        cr_assert_not_null(em_module_add_buffer(l, name, em_zeros(EM_SHAPE(1), EM_F32)));
    }
    cr_assert_eq(em_prune_l1_unstructured(l, "weight", 0.5), EM_OK, "%s", em_error());
    cr_assert_null(em_module_add_buffer(l, "weight_orig", em_zeros(EM_SHAPE(1), EM_F32)));
    em_error_clear();
    cr_assert_eq(em_prune_remove(l, "weight"), EM_OK, "%s", em_error());
    cr_assert_null(em_module_add_param(l, "weight", em_zeros(EM_SHAPE(1), EM_F32)));
    cr_assert(strstr(em_error(), "\"weight\" is already used"), "%s", em_error());
    em_error_clear();
    cr_assert_not_null(em_module_add_buffer(l, "weight_orig", em_zeros(EM_SHAPE(1), EM_F32)),
                       "%s", em_error());
    cr_assert_not_null(em_module_add_buffer(l, "weight_mask", em_zeros(EM_SHAPE(1), EM_F32)),
                       "%s", em_error());
    em_module_free(l);
}

Test(prune, masks_hold_through_optimizer_steps)
{
    em_manual_seed(1);
    em_module *l = em_linear_layer(8, 4, true);
    cr_assert_eq(em_prune_l1_unstructured(l, "weight", 0.5), EM_OK);
    em_optim *opt = em_sgd(l, (em_sgd_opts){.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1});
    em_tensor *x = em_randn(EM_SHAPE(16, 8), EM_F32, NULL);
    float mask[32], g[32], w[32];
    host(em_prune_mask(l, "weight"), mask);
    for (int step = 0; step < 3; step++) {
        em_scope_begin();
        em_tensor *loss = em_sum_all(em_square(em_forward(l, x)));
        cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
        host(l->params[0].value->grad, g);
        for (int i = 0; i < 32; i++)
            if (mask[i] == 0)
                cr_assert_eq(g[i], 0, "grad of pruned entry %d is %g", i, g[i]);
        cr_assert_eq(em_optim_step(opt), EM_OK, "%s", em_error());
        em_optim_zero_grad(opt);
        em_scope_end();
        em_tensor *eff = em_prune_param(l, "weight");
        host(eff, w);
        em_release(eff);
        for (int i = 0; i < 32; i++)
            if (mask[i] == 0)
                cr_assert_eq(w[i], 0, "pruned entry %d is %g after step %d", i, w[i], step);
    }
    em_release(x);
    em_optim_free(opt);
    em_module_free(l);
}

Test(prune, sparsity_report)
{
    em_manual_seed(2);
    em_module *m = em_sequential(3, linear_with(4, 2, w24), em_relu_layer(),
                                 em_linear_layer(2, 2, true));
    cr_assert_eq(em_prune_l1_unstructured(m->children[0].module, "weight", 0.5), EM_OK);
    em_sparsity rows[4];
    int64_t zeros, numel;
    cr_assert_eq(em_prune_sparsity(m, rows, 4, &zeros, &numel), 2);
    cr_assert_str_eq(rows[0].name, "0.weight");
    cr_assert_eq(rows[0].zeros, 4);
    cr_assert_eq(rows[0].numel, 8);
    cr_assert_str_eq(rows[1].name, "2.weight");
    cr_assert_eq(rows[1].numel, 4);
    cr_assert_eq(numel, 12);
    cr_assert_eq(zeros, 4 + rows[1].zeros);
    FILE *f = fopen("/dev/null", "w");
    cr_assert_float_eq(em_prune_report(m, f), (double)zeros / 12, 1e-12);
    fclose(f);
    em_module_free(m);
}

static em_module *mlp3(void)
{
    return em_sequential(5, em_linear_layer(6, 8, true), em_relu_layer(),
                         em_linear_layer(8, 5, true), em_relu_layer(),
                         em_linear_layer(5, 3, true));
}

static void forward_host(em_module *m, const em_tensor *x, float *y)
{
    em_tensor *t = em_forward(m, x);
    host(t, y);
    em_release(t);
}

/* Structured-pruned mlp3: half the rows of layers 0 and 2, one input column of layer 4. */
static em_module *pruned_mlp3(void)
{
    em_manual_seed(9);
    em_module *m = mlp3();
    /* positive biases make dead neurons send relu(b) != 0 on, which shrinking must fold */
    set_values(m->children[0].module->params[1].value, (float[]){.5f, .4f, .3f, .2f, .1f, .6f,
                                                                 .7f, .8f});
    cr_assert_eq(em_prune_ln_structured(m->children[0].module, "weight", 0.5, 2, 0), EM_OK);
    cr_assert_eq(em_prune_ln_structured(m->children[2].module, "weight", 0.5, 1, 0), EM_OK);
    cr_assert_eq(em_prune_ln_structured(m->children[4].module, "weight", 0.2, 1, 1), EM_OK);
    return m;
}

Test(prune, shrink_gives_the_masked_outputs)
{
    em_module *m = pruned_mlp3();
    em_tensor *x = em_randn(EM_SHAPE(7, 6), EM_F32, NULL);
    float want[21], got[21], m2[40], m4[15];
    forward_host(m, x, want);
    host(em_prune_mask(m->children[2].module, "weight"), m2);
    host(em_prune_mask(m->children[4].module, "weight"), m4);
    int64_t hidden2 = 0; /* layer 2 neurons with a live row and a live column in layer 4 */
    for (int r = 0; r < 5; r++) {
        bool row = false, col = false;
        for (int c = 0; c < 8; c++)
            row = row || m2[r * 8 + c] != 0;
        for (int q = 0; q < 3; q++)
            col = col || m4[q * 5 + r] != 0;
        hidden2 += row && col;
    }
    int64_t before = em_module_num_params(m);
    int64_t removed = em_prune_shrink(m);
    cr_assert_eq(removed, 4 + (5 - hidden2), "%s", em_error());
    cr_assert(!em_prune_is_pruned(m));
    cr_assert_eq(m->children[0].module->params[0].value->shape[0], 4);
    cr_assert_eq(m->children[2].module->params[0].value->shape[1], 4);
    cr_assert_eq(m->children[2].module->params[0].value->shape[0], hidden2);
    cr_assert_eq(m->children[4].module->params[0].value->shape[1], hidden2);
    cr_assert_lt(em_module_num_params(m), before);
    forward_host(m, x, got);
    for (int i = 0; i < 21; i++)
        cr_assert(fabsf(got[i] - want[i]) <= 1e-5f, "y[%d] %g, masked %g", i, got[i], want[i]);
    em_release(x);
    em_module_free(m);
}

/* Shrinking looks through every elementwise activation between two linear layers: here Mish,
 * Hardtanh and Softsign, whose f(b) a dead neuron sends on is folded into the next bias. */
Test(prune, shrink_looks_through_every_elementwise_activation)
{
    em_manual_seed(10);
    em_module *m = em_sequential(5, em_linear_layer(6, 8, true), em_mish_layer(),
                                 em_hardtanh_layer(-0.5, 0.5), em_softsign_layer(),
                                 em_linear_layer(8, 3, true));
    cr_assert_eq(em_prune_ln_structured(m->children[0].module, "weight", 0.5, 2, 0), EM_OK);
    em_tensor *x = em_randn(EM_SHAPE(4, 6), EM_F32, NULL);
    float want[12], got[12];
    forward_host(m, x, want);
    cr_assert_eq(em_prune_shrink(m), 4, "%s", em_error());
    cr_assert_eq(m->children[4].module->params[0].value->shape[1], 4);
    forward_host(m, x, got);
    for (int i = 0; i < 12; i++)
        cr_assert(fabsf(got[i] - want[i]) <= 1e-5f, "y[%d] %g, masked %g", i, got[i], want[i]);
    em_release(x);
    em_module_free(m);
}

static char *temp_path(char *buf)
{
    int fd = mkstemp(buf);
    cr_assert(fd >= 0);
    close(fd);
    return buf;
}

/* Saves m (with the pruned marker), loads it into a fresh mlp3, compares outputs on x. */
static em_module *round_trip(em_module *m, const em_tensor *x)
{
    char path[] = "/tmp/ember_test_pruneXXXXXX";
    temp_path(path);
    em_st_meta meta[1];
    cr_assert_eq(em_module_save(m, path, meta, em_prune_meta(meta)), EM_OK, "%s", em_error());
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load(path, &st), EM_OK, "%s", em_error());
    em_module *fresh = mlp3();
    cr_assert_eq(em_prune_prepare_load(fresh, st), EM_OK, "%s", em_error());
    cr_assert_eq(em_module_load(fresh, path), EM_OK, "%s", em_error());
    em_safetensors_free(st);
    unlink(path);
    float a[21], b[21];
    forward_host(m, x, a);
    forward_host(fresh, x, b);
    for (int i = 0; i < 21; i++)
        cr_assert_eq(a[i], b[i], "y[%d] %g after loading, %g before", i, b[i], a[i]);
    return fresh;
}

Test(prune, pruned_and_shrunk_models_save_and_load)
{
    em_module *m = pruned_mlp3();
    em_tensor *x = em_randn(EM_SHAPE(7, 6), EM_F32, NULL);
    em_module *fresh = round_trip(m, x);
    cr_assert(em_prune_is_pruned(fresh));
    float a[48], b[48];
    host(em_prune_mask(m->children[0].module, "weight"), a);
    host(em_prune_mask(fresh->children[0].module, "weight"), b);
    cr_assert_eq(memcmp(a, b, sizeof a), 0);
    em_module_free(fresh);

    cr_assert_gt(em_prune_shrink(m), 0);
    fresh = round_trip(m, x);
    cr_assert_eq(fresh->children[0].module->params[0].value->shape[0], 4);
    cr_assert(!em_prune_is_pruned(fresh));
    em_module_free(fresh);
    em_release(x);
    em_module_free(m);
}
