/* A command's --device and --tf32 (cmd/cmd.h). */
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
