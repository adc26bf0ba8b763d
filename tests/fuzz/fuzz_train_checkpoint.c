/* libFuzzer target: training checkpoints of arbitrary bytes resumed into a small model with an
 * Adam optimizer, a step scheduler, a generator, a grad scaler and a trainer's counters
 * (em_train_checkpoint_load);
 * any input must restore or fail with a message, never crash, leak or read past the file. */
#include <assert.h>
#include <stdint.h>

#include "ember.h"
#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(0, data, size);
    em_error_clear();
    /* the run of the seed files (tests/fuzz/corpus/train_checkpoint) */
    em_module *m = em_sequential(4, em_linear_layer(4, 3, true),
                                 em_batch_norm1d_layer(3, (em_batch_norm_opts){0}),
                                 em_relu_layer(), em_linear_layer(3, 2, true));
    em_optim *opt = em_adam(m, (em_adam_opts){.lr = 1e-2});
    em_scheduler *sched = em_step_lr(opt, 2, 0.5);
    em_grad_scaler *scaler = em_grad_scaler_new((em_grad_scaler_opts){0});
    em_generator rng = em_generator_new(1);
    assert(m && opt && sched && scaler);
    em_train_counters counters = {0};
    em_train_state s = {.model = m, .optim = opt, .scheduler = sched, .rng = &rng,
                        .scaler = scaler, .counters = &counters};
    if (em_train_checkpoint_load(path, &s) == EM_OK) {
        assert(counters.step >= 0 && counters.epoch_steps >= 0 &&
               counters.epoch_steps <= counters.step);
        em_scope_begin();
        em_tensor *loss = em_sum(em_forward(m, em_ones(EM_SHAPE(2, 4), EM_F32)), NULL, 0, false);
        assert(loss || em_error()[0]);
        if (loss && em_backward(loss) == EM_OK)
            em_optim_step(opt);
        em_scope_end();
    } else {
        assert(em_error()[0]);
    }
    em_grad_scaler_free(scaler);
    em_scheduler_free(sched);
    em_optim_free(opt);
    em_module_free(m);
    em_error_clear();
    return 0;
}
