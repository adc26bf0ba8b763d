/* libFuzzer target: the image-folder dataset over a directory tree the input describes: class
 * folders, image files of the input's bytes, links (to files, to folders, to nothing, to
 * themselves, to a /sys file, to /dev/zero), FIFOs and folders named like images. em_image_folder
 * lists the tree, the rest of the input changes it under the dataset (files truncated, removed,
 * replaced by FIFOs or links), then every sample is read. Each read must give a sample in
 * [0, 1], a skip (EM_BAD_IMAGE_SKIP) or an error with a message: never a crash, a leak, a double
 * free or a wait on a FIFO (the run's timeout). */
#define _GNU_SOURCE
#include <assert.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember.h"

enum { H = 4, W = 4, MAX_OPS = 48, MAX_FILE = 8192, MAX_SAMPLES = 32 };

typedef struct {
    const uint8_t *p;
    size_t n;
} script;

static unsigned next(script *s)
{
    if (s->n == 0)
        return 0;
    s->n--;
    return *s->p++;
}

static char base[64], root[96];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void remove_tree(void)
{
    nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void remove_base(void)
{
    remove_tree();
    rmdir(base);
}

/* root/c<k>/<n>.<ext> from one byte: k, n and ext chosen by it */
static void entry_path(unsigned a, char *out, size_t size)
{
    static const char *const exts[] = {"png", "bmp", "jpg", "PNG", "txt", "jpeg"};
    snprintf(out, size, "%s/c%u/%u.%s", root, a % 3, a / 3 % 6, exts[a / 18 % 6]);
}

/* The tree is changed through its own names only: a write or truncation never follows a link
 * (O_NOFOLLOW) nor waits on a FIFO (O_NONBLOCK), so nothing outside the tree is touched, and
 * the links outside it lead to files nobody can write (a read-only /sys file, /dev/zero). */
static int open_own(const char *path, int flags)
{
    return open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | flags, 0600);
}

static void link_to(script *s, const char *path)
{
    static const char *const targets[] = {
        "0.png", "../c1", "missing", NULL, "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
        "/dev/zero", "/proc/self/status"};
    unsigned t = next(s) % 7;
    symlink(targets[t] ? targets[t] : path, path);
}

/* Change op (0 to 7) to the tree; one that fails (a name already there, a missing folder)
 * changes nothing. */
static void apply(script *s, unsigned op)
{
    char path[192], cls[128];
    unsigned a = next(s);
    entry_path(a, path, sizeof path);
    snprintf(cls, sizeof cls, "%s/c%u", root, a % 3);
    switch (op) {
    case 0: /* a file of the input's next bytes */ {
        size_t n = next(s) | next(s) << 8;
        n = n > s->n ? s->n : n > MAX_FILE ? MAX_FILE : n;
        mkdir(cls, 0700);
        int fd = open_own(path, O_CREAT | O_TRUNC);
        if (fd >= 0) {
            ssize_t rc = write(fd, s->p, n);
            (void)rc;
            close(fd);
        }
        s->p += n, s->n -= n;
        break;
    }
    case 1: mkdir(cls, 0700); break;
    case 2: link_to(s, path); break;
    case 3: mkfifo(path, 0600); break;
    case 4: mkdir(path, 0700); break; /* a folder named like an image */
    case 5: { /* truncated to the next byte's length */
        unsigned len = next(s);
        int fd = open_own(path, 0);
        if (fd >= 0) {
            int rc = ftruncate(fd, len);
            (void)rc;
            close(fd);
        }
        break;
    }
    case 6: remove(path); break;
    case 7: symlink(next(s) % 2 ? "c0" : ".", cls); break; /* a class folder that is a link */
    }
}

static void read_samples(const em_dataset *ds, bool skip)
{
    int64_t n = em_dataset_len(ds), classes = ds->n_classes;
    size_t count = (size_t)em_shape_numel(&ds->x_shape);
    float *x = malloc(count * sizeof *x);
    assert(x);
    for (int64_t i = 0; i < n && i < MAX_SAMPLES; i++) {
        int64_t y = -1;
        em_status st = em_dataset_get(ds, i, x, &y);
        if (st == EM_OK) {
            assert(y >= 0 && y < classes);
            for (size_t k = 0; k < count; k++)
                assert(x[k] >= 0 && x[k] <= 1);
        } else {
            assert(st == EM_SKIP ? skip : em_error()[0] != 0);
        }
        em_error_clear();
    }
    free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base[0]) { /* in memory where there is a tmpfs */
        snprintf(base, sizeof base, "/dev/shm/ember-fuzz-XXXXXX");
        bool made = mkdtemp(base);
        if (!made)
            snprintf(base, sizeof base, "/tmp/ember-fuzz-XXXXXX");
        if (!made && !mkdtemp(base))
            abort();
        snprintf(root, sizeof root, "%s/t", base);
        atexit(remove_base);
    }
    if (mkdir(root, 0700) != 0)
        abort();
    script s = {data, size};
    unsigned flags = next(&s);
    bool skip = flags & 1;
    em_image_folder_opts o = {.height = H, .width = W, .channels = flags & 2 ? 3 : 1,
                              .max_pixels = 1 << 16,
                              .on_bad_image = skip ? EM_BAD_IMAGE_SKIP : EM_BAD_IMAGE_ERROR};
    em_dataset *ds = NULL;
    bool listed = false;
    em_error_clear();
    for (int i = 0; i < MAX_OPS && s.n > 0; i++) {
        unsigned op = next(&s) % 9;
        if (op < 8) {
            apply(&s, op);
        } else if (!listed) { /* list the tree; what follows changes it */
            ds = em_image_folder(root, o);
            listed = true;
        }
    }
    if (!listed)
        ds = em_image_folder(root, o);
    if (ds) {
        read_samples(ds, skip);
        const char *lines[4];
        int64_t k = em_image_folder_skipped(ds, lines, 4);
        for (int64_t j = 0; j < k && j < 4; j++)
            assert(lines[j] && lines[j][0]);
        em_dataset_free(ds);
    } else {
        assert(em_error()[0]);
    }
    em_error_clear();
    remove_tree();
    return 0;
}
