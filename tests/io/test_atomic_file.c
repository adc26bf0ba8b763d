/* Atomic replacement (io/atomic_file.h): the data goes to an unnamed file, so nothing named
 * exists while a save runs and a writer killed mid-save leaves nothing; temporaries of dead
 * writers are removed by the next save, a live writer's are not; an unwritable target is found
 * before any work. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ember.h"
#include "helpers/files.h"
#include "io/atomic_file.h"

TestSuite(atomic_file, .init = em_test_dir_init, .fini = em_test_dir_fini);

/* The names in em_test_dir, sorted and joined with spaces. */
static const char *listing(void)
{
    static char out[1024];
    char names[16][64];
    int n = 0;
    DIR *d = opendir(em_test_dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.' && n < 16)
            snprintf(names[n++], 64, "%.63s", e->d_name);
    closedir(d);
    qsort(names, (size_t)n, 64, (int (*)(const void *, const void *))strcmp);
    out[0] = 0;
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i ? " " : "", names[i]);
    return out;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static void save_text(const char *path, const char *text)
{
    em_atomic_file af;
    cr_assert_eq(em_atomic_open(&af, path), EM_OK, "%s", em_error());
    fputs(text, af.f);
    cr_assert_eq(em_atomic_commit(&af), EM_OK, "%s", em_error());
}

Test(atomic_file, nothing_named_while_writing)
{
    write_text(em_test_path("model.st"), "old");
    em_atomic_file af;
    cr_assert_eq(em_atomic_open(&af, em_test_path("model.st")), EM_OK, "%s", em_error());
    fputs("new contents", af.f);
    cr_assert(af.unnamed, "this filesystem takes O_TMPFILE (tmpfs and ext4 do)");
    cr_assert_str_eq(listing(), "model.st");
    cr_assert_eq(em_atomic_commit(&af), EM_OK, "%s", em_error());
    cr_assert_str_eq(listing(), "model.st");
    char buf[32] = {0};
    FILE *f = fopen(em_test_path("model.st"), "r");
    cr_assert_eq(fread(buf, 1, sizeof buf - 1, f), 12);
    fclose(f);
    cr_assert_str_eq(buf, "new contents");
}

Test(atomic_file, a_writer_killed_mid_save_leaves_nothing)
{
    write_text(em_test_path("model.st"), "old");
    pid_t pid = fork();
    if (pid == 0) {
        em_atomic_file af;
        if (em_atomic_open(&af, em_test_path("model.st")) == EM_OK) {
            fputs("half of it", af.f);
            fflush(af.f);
        }
        raise(SIGKILL);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status));
    cr_assert_str_eq(listing(), "model.st");
}

Test(atomic_file, dead_writers_temporaries_go_live_ones_stay)
{
    write_text(em_test_path("model.st.tmp.4242"), "left by a killed save");
    write_text(em_test_path("model.st.tmp.77"), "a save still running");
    write_text(em_test_path("model.st.tmp.x"), "not a temporary of ember's");
    write_text(em_test_path("other.st.tmp.5"), "another file's");
    int live = open(em_test_path("model.st.tmp.77"), O_RDONLY);
    cr_assert(live >= 0 && flock(live, LOCK_EX) == 0);
    save_text(em_test_path("model.st"), "new");
    cr_assert_str_eq(listing(), "model.st model.st.tmp.77 model.st.tmp.x other.st.tmp.5");
    close(live);
    save_text(em_test_path("model.st"), "newer");
    cr_assert_str_eq(listing(), "model.st model.st.tmp.x other.st.tmp.5");
}

Test(atomic_file, unwritable_targets_are_found_first)
{
    char want[256];
    cr_assert_eq(em_atomic_file_check(em_test_path("missing/model.st")), EM_ERR_IO);
    snprintf(want, sizeof want, "cannot write '%s/missing/model.st': cannot create a file in "
             "'%s/missing': No such file or directory", em_test_dir, em_test_dir);
    cr_assert_str_eq(em_error(), want);
    em_error_clear();
    cr_assert_eq(em_atomic_file_check(em_test_dir), EM_ERR_IO);
    snprintf(want, sizeof want, "cannot write '%s': it is a directory", em_test_dir);
    cr_assert_str_eq(em_error(), want);
    em_error_clear();
    cr_assert_eq(em_atomic_file_check(em_test_path("model.st")), EM_OK, "%s", em_error());
    cr_assert_str_eq(listing(), "", "the check leaves nothing behind");
}

/* A trainer asked to write checkpoints where it cannot fails at creation, before any epoch. */
Test(atomic_file, trainer_checks_its_checkpoint_path_first)
{
    em_module *m = em_linear_layer(2, 2, true);
    em_optim *o = em_sgd(m, (em_sgd_opts){.lr = 0.1});
    cr_assert(m && o, "%s", em_error());
    em_trainer_opts to = {.checkpoint = em_test_path("no/x")};
    cr_assert_null(em_trainer_new(m, o, NULL, to));
    cr_assert_not_null(strstr(em_error(), "cannot create a file in"), "%s", em_error());
    em_optim_free(o);
    em_module_free(m);
}
