/* em_open_regular, the one way ember opens a file to read: a regular file opens (blocking again,
 * with its size); a FIFO, a directory, a device or a socket is refused at once with an error
 * naming the path and what it is, and so is each through the safetensors reader that model
 * files, checkpoints and caches go through. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ember.h"
#include "helpers/files.h"
#include "io/regular_file.h"

TestSuite(regular_file, .init = em_test_dir_init, .fini = em_test_dir_fini, .timeout = 20);

/* refused: -1, EM_ERR_IO and "fn: cannot open 'PATH': WHY" */
static void expect_refused(const char *path, const char *why)
{
    em_error_clear();
    cr_assert_eq(em_open_regular("reader", path, NULL), -1, "%s opened", path);
    cr_assert_eq(em_error_status(), EM_ERR_IO);
    char want[512];
    snprintf(want, sizeof want, "reader: cannot open '%s': %s", path, why);
    cr_assert_str_eq(em_error(), want);
}

Test(regular_file, a_regular_file_opens_blocking_with_its_size)
{
    const char *path = em_test_path("seven");
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fputs("7 bytes", f);
    fclose(f);
    int64_t size = -1;
    int fd = em_open_regular("reader", path, &size);
    cr_assert_geq(fd, 0, "%s", em_error());
    cr_expect_eq(size, 7);
    cr_expect_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0, "the descriptor blocks again");
    char buf[8] = {0};
    cr_expect_eq(read(fd, buf, sizeof buf), 7);
    cr_expect_str_eq(buf, "7 bytes");
    close(fd);
    FILE *s = em_fopen_regular("reader", path, &size);
    cr_assert_not_null(s, "%s", em_error());
    cr_expect_eq(fgetc(s), '7');
    fclose(s);
    cr_expect_not(em_has_error());
}

Test(regular_file, special_files_are_refused_at_once)
{
    const char *fifo = em_test_path("fifo"), *sock = em_test_path("sock");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    expect_refused(fifo, "it is a FIFO, not a regular file");
    expect_refused(em_test_dir, "it is a directory, not a regular file");
    expect_refused("/dev/null", "it is a character device, not a regular file");
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    expect_refused(sock, "No such device or address"); /* open(2) itself refuses a socket */
    close(s);
    expect_refused(em_test_path("missing"), "No such file or directory");
    /* a link to a FIFO is the FIFO */
    cr_assert_eq(symlink(fifo, em_test_path("link")), 0);
    expect_refused(em_test_path("link"), "it is a FIFO, not a regular file");
    cr_expect_null(em_fopen_regular("reader", fifo, NULL));
    cr_expect_eq(em_error_status(), EM_ERR_IO);
}

/* model files, training checkpoints, the response cache and em_module_load all read through
 * em_safetensors_load */
Test(regular_file, safetensors_readers_refuse_a_fifo)
{
    const char *fifo = em_test_path("model.safetensors");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    char want[512];
    snprintf(want, sizeof want, "em_safetensors_load: cannot open '%s': it is a FIFO, not a "
             "regular file", fifo);
    em_safetensors *st = NULL;
    cr_expect_eq(em_safetensors_load(fifo, &st), EM_ERR_IO);
    cr_expect_str_eq(em_error(), want);
    cr_expect_null(st);
    em_error_clear();
    em_module *m = em_linear_layer(2, 2, true);
    cr_expect_eq(em_module_load(m, fifo), EM_ERR_IO);
    cr_expect_str_eq(em_error(), want);
    em_error_clear();
    em_train_state s = {.model = m};
    cr_expect_eq(em_train_checkpoint_load(fifo, &s), EM_ERR_IO);
    cr_expect_str_eq(em_error(), want);
    em_module_free(m);
}
