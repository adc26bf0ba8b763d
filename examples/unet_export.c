/* Another program: it loads the U-Net unet_denoiser.c saved, knowing nothing of its layers (no
 * module type registered, no architecture given), runs it and exports it to ONNX.
 *
 *   unet_export DIR
 *
 * Reads DIR/unet.safetensors and DIR/sample.bin, prints the model's summary and its output sum
 * on the sample (unet_denoiser printed the same), writes DIR/unet.onnx and the output as
 * DIR/output.bin (f32). Exits 1 with ember's message on any error. */
#include <ember/ember.h>
#include <stdio.h>

#define SIDE 16

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: unet_export DIR\n");
        return 2;
    }
    char path[4][4096];
    const char *names[4] = {"unet.safetensors", "sample.bin", "unet.onnx", "output.bin"};
    for (int i = 0; i < 4; i++)
        snprintf(path[i], sizeof path[i], "%s/%s", argv[1], names[i]);
    float v[SIDE * SIDE];
    FILE *f = fopen(path[1], "rb");
    bool read = f && fread(v, sizeof v, 1, f) == 1;
    if (f)
        fclose(f);
    em_module *net = read ? em_model_load(path[0]) : NULL;
    em_status st = net ? EM_OK : read ? em_error_status()
                                      : em_set_error(EM_ERR_IO, "cannot read %s", path[1]);
    em_scope_begin();
    em_tensor *x = em_from_data(EM_SHAPE(1, 1, SIDE, SIDE), EM_F32, v);
    if (st == EM_OK)
        st = em_module_summary(net, EM_SHAPE(1, 1, SIDE, SIDE), stdout);
    em_module_eval(net);
    bool grad = em_set_grad_enabled(false);
    em_tensor *y = st == EM_OK ? em_forward(net, x) : NULL;                  // (1, 1, 16, 16)
    em_set_grad_enabled(grad);
    if (st == EM_OK && !y)
        st = em_error_status();
    if (st == EM_OK) {
        printf("loaded %s; output sum on the sample %.6f\n", path[0], em_item(em_sum_all(y)));
        st = em_onnx_export(net, x, path[2], (em_onnx_opts){0});
    }
    if (st == EM_OK) {
        f = fopen(path[3], "wb");
        bool written = f && em_copy_to_host(y, EM_F32, v) == EM_OK &&
                       fwrite(v, sizeof v, 1, f) == 1;
        if (f)
            written = fclose(f) == 0 && written;
        st = written ? EM_OK : em_set_error(EM_ERR_IO, "cannot write %s", path[3]);
    }
    em_scope_end();
    if (st == EM_OK)
        printf("exported %s\n", path[2]);
    else
        fprintf(stderr, "unet_export: %s\n", em_error());
    em_module_free(net);
    return st == EM_OK ? 0 : 1;
}
