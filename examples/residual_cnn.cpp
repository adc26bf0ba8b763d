// A user's program in C++: a small residual CNN against the installed ember.
//
//   residual_cnn MODEL.safetensors
//
// Makes 12x12 images of a horizontal bar, a vertical bar or a diagonal (class 0, 1, 2) at random
// places under noise, trains a stem (conv-bn-relu), two ResNet basic blocks, global average
// pooling and a linear head with em_trainer (SGD with momentum, one-cycle schedule, gradient
// clipping, validation after every epoch), saves the model, loads it into a fresh one and checks
// that both give the same logits bit for bit. Prints one line:
// "accuracy 0.9917 params 2483 body_params 1184". Exits 1 with ember's message on any error.
#include <ember/ember.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr int64_t kSide = 12, kClasses = 3, kWidth = 8, kTrain = 480, kVal = 120;
constexpr int kEpochs = 6;

em_module *conv_bn(int64_t in, int64_t out)
{
    em_conv2d_layer_opts o{};
    o.padding = 1;
    o.no_bias = true;
    return em_sequential(2, em_conv2d_layer(in, out, 3, o),
                         em_batch_norm2d_layer(out, em_batch_norm_opts{}));
}

// A ResNet basic block: relu(x + bn(conv(relu(bn(conv(x)))))).
em_module *basic_block()
{
    em_module *body = em_sequential(3, conv_bn(kWidth, kWidth), em_relu_layer(),
                                    conv_bn(kWidth, kWidth));
    return em_sequential(2, em_residual(body, nullptr), em_relu_layer());
}

em_module *build()
{
    return em_sequential(7, conv_bn(1, kWidth), em_relu_layer(), basic_block(), basic_block(),
                         em_adaptive_avg_pool2d_layer(1, 1), em_flatten_layer(),
                         em_linear_layer(kWidth, kClasses, true));
}

// n images x (n, 1, kSide, kSide) and their classes y (n), from seed.
struct Images {
    std::vector<float> x;
    std::vector<int64_t> y;
};

Images make_images(int64_t n, unsigned seed)
{
    std::mt19937 rng(seed);
    auto uniform = [&rng] { return static_cast<float>(rng() >> 8) / 16777216.0f; };
    Images im{std::vector<float>(n * kSide * kSide), std::vector<int64_t>(n)};
    for (int64_t i = 0; i < n; i++) {
        float *img = &im.x[i * kSide * kSide];  // (kSide, kSide)
        int64_t cls = i % kClasses, at = rng() % kSide;
        im.y[i] = cls;
        for (int64_t r = 0; r < kSide; r++)
            for (int64_t c = 0; c < kSide; c++) {
                bool on = cls == 0 ? r == at : cls == 1 ? c == at : (r + c + at) % kSide == 0;
                img[r * kSide + c] = (on ? 1.0f : 0.0f) + 0.6f * (uniform() - 0.5f);
            }
    }
    return im;
}

em_dataset *dataset(int64_t n, unsigned seed)
{
    Images im = make_images(n, seed);
    em_tensor *x = em_from_data(EM_SHAPE(n, 1, kSide, kSide), EM_F32, im.x.data());
    em_tensor *y = em_from_data(EM_SHAPE(n), EM_I64, im.y.data());
    em_dataset *ds = x && y ? em_tensor_dataset(x, y) : nullptr;
    em_release(x);
    em_release(y);
    return ds;
}

// The logits of the first n samples of ds (the caller releases them).
em_tensor *logits_of(em_module *model, const em_dataset *ds, int64_t n)
{
    em_loader_opts lo{};
    lo.batch_size = n;
    em_loader *dl = em_loader_new(ds, lo);
    em_batch b;
    em_tensor *out = nullptr;
    if (dl && em_loader_next(dl, &b) == EM_OK) {
        bool grad = em_set_grad_enabled(false);
        em_module_eval(model);
        out = em_forward(model, b.x);
        em_set_grad_enabled(grad);
        em_release(b.x);
        em_release(b.y);
    }
    em_loader_free(dl);
    return out;
}

// Everything the run holds, released whatever state it stopped in.
struct Run {
    em_dataset *train = nullptr, *val = nullptr;
    em_module *model = nullptr, *again = nullptr;
    em_optim *opt = nullptr;
    em_loader *loader = nullptr;
    em_scheduler *sched = nullptr;
    em_trainer *trainer = nullptr;
    em_tensor *a = nullptr, *b = nullptr;
    ~Run()
    {
        em_release(b);
        em_release(a);
        em_trainer_free(trainer);
        em_scheduler_free(sched);
        em_loader_free(loader);
        em_optim_free(opt);
        em_module_free(again);
        em_module_free(model);
        em_dataset_free(val);
        em_dataset_free(train);
    }
};

em_status run(const char *model_path)
{
    em_manual_seed(3);
    Run r;
    r.train = dataset(kTrain, 1);
    r.val = dataset(kVal, 2);
    r.model = r.train && r.val ? build() : nullptr;
    if (!r.model)
        return em_error_status();
    // a child by its dotted name: the first block's residual body
    em_module *body = em_module_child(r.model, "2.0.body");
    if (!body)
        return em_error_status();

    em_sgd_opts so{};
    so.lr = 0.05;
    so.momentum = 0.9;
    em_loader_opts lo{};
    lo.batch_size = 32;
    lo.shuffle = true;
    lo.seed = 3;
    if (!(r.opt = em_sgd(r.model, so)) || !(r.loader = em_loader_new(r.train, lo)))
        return em_error_status();
    em_one_cycle_opts oc{};
    oc.max_lr = 0.1;
    oc.total_steps = kEpochs * em_loader_num_batches(r.loader);
    em_trainer_opts to{};
    to.tech.clip = 5.0;
    to.val = r.val;
    if (!(r.sched = em_one_cycle_lr(r.opt, oc)))
        return em_error_status();
    to.scheduler = r.sched;
    if (!(r.trainer = em_trainer_new(r.model, r.opt, r.loader, to)))
        return em_error_status();
    em_status st = em_trainer_fit(r.trainer, kEpochs);
    if (st != EM_OK)
        return st;
    em_epoch_stats last = em_trainer_get_stats(r.trainer).last_epoch;

    if ((st = em_module_save(r.model, model_path, nullptr, 0)) != EM_OK)
        return st;
    if (!(r.again = build()) || (st = em_module_load(r.again, model_path)) != EM_OK)
        return r.again ? st : em_error_status();
    r.a = logits_of(r.model, r.val, kVal);
    r.b = r.a ? logits_of(r.again, r.val, kVal) : nullptr;
    if (!r.b)
        return em_error_status();
    if (std::memcmp(em_data_ptr(r.a), em_data_ptr(r.b), em_numel(r.a) * sizeof(float)) != 0)
        return em_set_error(EM_ERR_STATE, "the reloaded model's logits differ");
    std::printf("accuracy %.4f params %lld body_params %lld\n", last.val_acc,
                static_cast<long long>(em_module_num_params(r.model)),
                static_cast<long long>(em_module_num_params(body)));
    return EM_OK;
}

}  // namespace

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s MODEL.safetensors\n", argv[0]);
        return 2;
    }
    if (run(argv[1]) != EM_OK) {
        std::fprintf(stderr, "residual_cnn: %s\n", em_error());
        return 1;
    }
    return 0;
}
