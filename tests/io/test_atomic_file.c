/* Atomic replacement (io/atomic_file.h): the data goes to an unnamed file, so nothing named
 * exists while a save runs and a writer killed mid-save or giving up leaves nothing; temporaries
 * of dead writers are removed by the next save, a live writer's are not; an unwritable target is
 * found before any work. */
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

/* The first 63 bytes of the file at path. */
static const char *read_text(const char *path)
{
    static char buf[64];
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    buf[fread(buf, 1, sizeof buf - 1, f)] = 0;
    fclose(f);
    return buf;
}

static void save_text(const char *path, const char *text)
{
    em_atomic_file *af = em_atomic_file_new(path);
    cr_assert_not_null(af, "%s", em_error());
    fputs(text, em_atomic_file_stream(af));
    cr_assert_eq(em_atomic_file_commit(af), EM_OK, "%s", em_error());
}

Test(atomic_file, nothing_named_while_writing)
{
    write_text(em_test_path("model.st"), "old");
    em_atomic_file *af = em_atomic_file_new(em_test_path("model.st"));
    cr_assert_not_null(af, "%s", em_error());
    fputs("new contents", em_atomic_file_stream(af));
    cr_assert_str_eq(listing(), "model.st",
                     "no temporary is named while writing: this filesystem takes O_TMPFILE "
                     "(tmpfs and ext4 do)");
    cr_assert_eq(em_atomic_file_commit(af), EM_OK, "%s", em_error());
    cr_assert_str_eq(listing(), "model.st");
    cr_assert_str_eq(read_text(em_test_path("model.st")), "new contents");
}

/* A writer that gives up (em_atomic_file_free before commit) leaves the target as it was and no
 * temporary; NULL is refused by commit and taken by free. */
Test(atomic_file, a_writer_that_gives_up_leaves_the_target)
{
    write_text(em_test_path("model.st"), "old");
    em_atomic_file *af = em_atomic_file_new(em_test_path("model.st"));
    cr_assert_not_null(af, "%s", em_error());
    fputs("new contents", em_atomic_file_stream(af));
    em_atomic_file_free(af);
    cr_assert_str_eq(listing(), "model.st");
    cr_assert_str_eq(read_text(em_test_path("model.st")), "old");
    em_atomic_file_free(NULL);
    cr_assert_eq(em_atomic_file_commit(NULL), EM_ERR_ARG);
    cr_assert_str_eq(em_error(), "em_atomic_file_commit: NULL file");
    em_error_clear();
}

Test(atomic_file, a_writer_killed_mid_save_leaves_nothing)
{
    write_text(em_test_path("model.st"), "old");
    pid_t pid = fork();
    if (pid == 0) {
        em_atomic_file *af = em_atomic_file_new(em_test_path("model.st"));
        if (af) {
            fputs("half of it", em_atomic_file_stream(af));
            fflush(em_atomic_file_stream(af));
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
