/* A command's --device and --tf32, and its --amp (cmd/cmd.h). */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"

int cmd_device(const char *command, const char *name, bool tf32, em_device *out)
{
    *out = !strcmp(name, "cuda") ? EM_CUDA : EM_CPU;
    if (!em_device_available(*out)) {
        fprintf(stderr, "%s: --device %s: no %s device is available (ember was built without "
                "its backend, or no device and driver were found)\n", command, name, name);
        return 2;
    }
    if (tf32 && em_set_tf32(true) != EM_OK) {
        fprintf(stderr, "%s: --tf32: %s\n", command, em_error());
        return 2;
    }
    return 0;
}

em_dtype cmd_amp_dtype(const char *name)
{
    return !strcmp(name, "f16") ? EM_F16 : !strcmp(name, "bf16") ? EM_BF16 : EM_F32;
}
