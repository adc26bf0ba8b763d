/* Running the `ember` command for the CLI suites, and the data they run it on (see
 * ember_cli.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "helpers/ember_cli.h"

int em_test_ember(const char *args, char *out, size_t n)
{
    const char *bin = getenv("EMBER_BIN");
    out[0] = '\0';
    if (!bin) {
        fprintf(stderr, "em_test_ember: EMBER_BIN is not set\n");
        return -1;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t got = fread(out, 1, n - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void put_be32(FILE *f, uint32_t v)
{
    uint8_t b[4] = {v >> 24, v >> 16, v >> 8, v};
    fwrite(b, 1, 4, f);
}

/* One split's images and labels; false when a file cannot be written. */
static bool write_split(const char *dir, const char *split, int n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", dir, split);
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    put_be32(f, 0x803);
    put_be32(f, (uint32_t)n);
    put_be32(f, 28);
    put_be32(f, 28);
    for (int i = 0; i < n * 784; i++)
        fputc((i * 37 + i / 784 * 11) & 255, f);
    bool ok = fclose(f) == 0;
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", dir, split);
    if (!ok || !(f = fopen(path, "wb")))
        return false;
    put_be32(f, 0x801);
    put_be32(f, (uint32_t)n);
    for (int i = 0; i < n; i++)
        fputc(i % 10, f);
    return fclose(f) == 0;
}

bool em_test_write_fashion_noise(const char *dir)
{
    return write_split(dir, "train", 96) && write_split(dir, "t10k", 32);
}

bool em_test_write_fortunes(const char *dir)
{
    const char *words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat", ".\n", "%\n"};
    char path[512];
    for (int f = 0; f < 2; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, f ? "wisdom" : "cookie");
        FILE *out = fopen(path, "w");
        if (!out)
            return false;
        for (int i = 0; i < 900; i++)
            fputs(words[(i * 7 + f) % 8], out);
        if (fclose(out))
            return false;
    }
    snprintf(path, sizeof path, "%s/cookie.dat", dir);
    FILE *dat = fopen(path, "w");
    return dat && fputs("\xff\x01 binary index", dat) >= 0 && fclose(dat) == 0;
}
