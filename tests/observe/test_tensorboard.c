/* TensorBoard event files: CRC-32C and TFRecord framing against known bytes, then every scalar
 * and histogram read back by TensorBoard's own event loader (tests/python/tb_read.py), a purge
 * step hiding a crashed run's last points from TensorBoard's accumulator (tb_shown.py), a file
 * cut short read up to its last complete record, and the errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ember.h"
#include "helpers/files.h"
#include "helpers/venv.h"
#include "io/tfrecord_internal.h"

Test(tensorboard, crc32c_known_values)
{
    /* RFC 3720 (iSCSI) B.4 and the usual check value */
    uint8_t zeros[32] = {0}, ones[32];
    memset(ones, 0xFF, sizeof ones);
    cr_expect_eq(em_crc32c("123456789", 9), 0xE3069283u);
    cr_expect_eq(em_crc32c(zeros, 32), 0x8A9136AAu);
    cr_expect_eq(em_crc32c(ones, 32), 0x62A8AB43u);
    cr_expect_eq(em_crc32c("", 0), 0u);
}

Test(tensorboard, tfrecord_framing_golden_bytes)
{
    /* the masked CRCs from tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c:
     * of the length 5 as u64 LE, 0x3e04b2ea; of b"hello", 0x191c1fbb */
    static const uint8_t want[] = {5, 0, 0, 0, 0, 0, 0, 0, 0xea, 0xb2, 0x04, 0x3e,
                                   'h', 'e', 'l', 'l', 'o', 0xbb, 0x1f, 0x1c, 0x19};
    char path[] = "/tmp/ember_tfrecord_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "wb");
    cr_assert_eq(em_tfrecord_write(f, "hello", 5, "test", path), EM_OK, "%s", em_error());
    fclose(f);
    uint8_t got[64];
    f = fopen(path, "rb");
    size_t n = fread(got, 1, sizeof got, f);
    fclose(f);
    unlink(path);
    cr_assert_eq(n, sizeof want);
    cr_expect_arr_eq(got, want, sizeof want);
}

/* A temporary log directory (removed with its files by rm_dir). */
static void make_dir(char *dir)
{
    strcpy(dir, "/tmp/ember_tb_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

/* A writer logging into a new temporary directory, whose name goes to dir. */
static em_tb_writer *writer_in_new_dir(char *dir)
{
    make_dir(dir);
    em_tb_writer *w = em_tb_writer_new(dir);
    cr_assert_not_null(w, "%s", em_error());
    return w;
}

static void rm_dir(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* The lines TensorBoard's loader printed for path; fails the test when it could not run. */
static char *read_back(const char *path)
{
    char *out = em_test_venv_output("tb_read.py", path);
    cr_assert_not_null(out, "TensorBoard's reader did not run (see above)");
    return out;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static double loss_at(int step)
{
    return 2.5 / (step + 1) + 0.01 * sin(step);
}

Test(tensorboard, scalars_and_histograms_read_back_by_tensorboard)
{
    if (em_test_venv_skip())
        return;
    char dir[64];
    make_dir(dir);
    char logdir[128];
    snprintf(logdir, sizeof logdir, "%s/run/a", dir); /* parents are made */
    em_tb_writer *w = em_tb_writer_new(logdir);
    cr_assert_not_null(w, "%s", em_error());
    const int steps = 40;
    for (int s = 0; s < steps; s++) {
        cr_assert_eq(em_tb_writer_add_scalar(w, "train/loss", loss_at(s), s), EM_OK, "%s", em_error());
        cr_assert_eq(em_tb_writer_add_scalar(w, "train/lr", 0.1 * (1 - s / 40.0), s), EM_OK);
    }
    float values[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    em_tensor *t = em_from_data(EM_SHAPE(2, 4), EM_F32, values);
    cr_assert_eq(em_tb_writer_add_histogram(w, "weights/fc", t, 7, 4), EM_OK, "%s", em_error());
    em_tensor *same = em_full(EM_SHAPE(3), EM_F64, 2.5);
    cr_assert_eq(em_tb_writer_add_histogram(w, "weights/const", same, 8, 0), EM_OK, "%s", em_error());
    int64_t written = em_tb_writer_records(w);
    cr_assert_eq(written, 1 + 2 * steps + 2);
    char path[512];
    snprintf(path, sizeof path, "%s", em_tb_writer_path(w));
    cr_assert_eq(em_tb_writer_free(w), EM_OK);

    char *out = read_back(path);
    cr_expect_eq(count_lines(out), written, "records written %lld, read back %d:\n%s",
                 (long long)written, count_lines(out), out);
    char *line = strtok(out, "\n");
    cr_assert_not_null(line);
    cr_expect_str_eq(line, "version 0 brain.Event:2");
    for (int s = 0; s < steps; s++) {
        char tag[64];
        int step;
        double v;
        line = strtok(NULL, "\n");
        cr_assert_not_null(line);
        cr_assert_eq(sscanf(line, "scalar %d %63s %lf", &step, tag, &v), 3, "%s", line);
        cr_expect_eq(step, s);
        cr_expect_str_eq(tag, "train/loss");
        cr_expect_eq(v, (double)(float)loss_at(s), "step %d: %.9g", s, v);
        line = strtok(NULL, "\n");
        cr_assert_not_null(line);
        cr_assert_eq(sscanf(line, "scalar %d %63s %lf", &step, tag, &v), 3, "%s", line);
        cr_expect_eq(step, s);
        cr_expect_str_eq(tag, "train/lr");
        cr_expect_eq(v, (double)(float)(0.1 * (1 - s / 40.0)));
    }
    /* 0..7 in 4 buckets of width 1.75: [0,1.75) [1.75,3.5) [3.5,5.25) [5.25,7], two each;
     * sum 28, sum of squares 140 */
    line = strtok(NULL, "\n");
    cr_assert_not_null(line);
    cr_expect_str_eq(line, "histo 7 weights/fc 0.0 7.0 8.0 28.0 140.0 4 0.0 1.75 2.0 1.75 3.5 "
                           "2.0 3.5 5.25 2.0 5.25 7.0 2.0");
    /* all equal: one bucket, [2.5, 2.5] */
    line = strtok(NULL, "\n");
    cr_assert_not_null(line);
    cr_expect_str_eq(line, "histo 8 weights/const 2.5 2.5 3.0 7.5 18.75 1 2.5 2.5 3.0");
    free(out);
    em_release(t);
    em_release(same);
    rm_dir(dir);
}

/* A run that logged steps 0..9 then crashed, resumed at step 5 in a new file that marks the
 * purge (em_tb_writer_purge, SummaryWriter(purge_step=5)'s events): TensorBoard shows steps 0..4 from
 * the first file and 5..11 from the second, each once; the raw records hold both. */
Test(tensorboard, a_purge_step_hides_what_a_crashed_run_logged_past_it)
{
    if (em_test_venv_skip())
        return;
    char dir[64];
    make_dir(dir);
    em_tb_writer *a = em_tb_writer_new(dir);
    cr_assert_not_null(a, "%s", em_error());
    for (int s = 0; s < 10; s++)
        cr_assert_eq(em_tb_writer_add_scalar(a, "loss", 100 + s, s), EM_OK, "%s", em_error());
    cr_assert_eq(em_tb_writer_free(a), EM_OK);
    em_tb_writer *b = em_tb_writer_new(dir);
    cr_assert_not_null(b, "%s", em_error());
    cr_assert_eq(em_tb_writer_purge(b, 5), EM_OK, "%s", em_error());
    cr_expect_eq(em_tb_writer_records(b), 3, "file_version, then file_version and START at step 5");
    for (int s = 5; s < 12; s++)
        cr_assert_eq(em_tb_writer_add_scalar(b, "loss", 200 + s, s), EM_OK, "%s", em_error());
    char path[512];
    snprintf(path, sizeof path, "%s", em_tb_writer_path(b));
    cr_assert_eq(em_tb_writer_free(b), EM_OK);

    char *shown = em_test_venv_output("tb_shown.py", dir);
    cr_assert_not_null(shown, "TensorBoard's accumulator did not run (see above)");
    char want[1024] = "";
    for (int s = 0; s < 12; s++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "scalar %d loss %d.0\n", s,
                 s < 5 ? 100 + s : 200 + s);
    cr_expect_str_eq(shown, want);
    free(shown);
    char *raw = read_back(path);
    const char *head = "version 0 brain.Event:2\nversion 5 brain.Event:2\nscalar 5 loss 205.0";
    cr_expect(strstr(raw, head) == raw, "the raw records keep both: %s", raw);
    free(raw);
    cr_assert_eq(em_tb_writer_purge(NULL, 1), EM_ERR_ARG);
    em_error_clear();
    rm_dir(dir);
}

/* The byte offset just past each record of the TFRecord file at path; returns the count. */
static int record_ends(const char *path, long *ends, int max)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    int n = 0;
    uint8_t len_le[8];
    while (n < max && fread(len_le, 1, 8, f) == 8) {
        uint64_t len = 0;
        for (int i = 7; i >= 0; i--)
            len = len << 8 | len_le[i];
        cr_assert_eq(fseek(f, (long)len + 8, SEEK_CUR), 0);
        ends[n++] = ftell(f);
    }
    fclose(f);
    return n;
}

Test(tensorboard, a_file_cut_short_reads_up_to_its_last_complete_record)
{
    if (em_test_venv_skip())
        return;
    char dir[64];
    em_tb_writer *w = writer_in_new_dir(dir);
    for (int s = 0; s < 10; s++)
        cr_assert_eq(em_tb_writer_add_scalar(w, "loss", loss_at(s), s), EM_OK);
    char path[512], cut[600];
    snprintf(path, sizeof path, "%s", em_tb_writer_path(w));
    snprintf(cut, sizeof cut, "%s/cut.tfevents", dir);
    long ends[16];
    int n = record_ends(path, ends, 16);
    cr_assert_eq(n, 11);
    /* a crash inside the 8th record's header, inside its data, and one byte short of its end */
    long sizes[] = {ends[6] + 5, ends[6] + 20, ends[7] - 1, ends[7]};
    int complete[] = {7, 7, 7, 8};
    for (int k = 0; k < 4; k++) {
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "head -c %ld '%s' > '%s'", sizes[k], path, cut);
        cr_assert_eq(system(cmd), 0);
        char *out = read_back(cut);
        cr_expect_eq(count_lines(out), complete[k], "cut at %ld bytes: %s", sizes[k], out);
        free(out);
    }
    em_tb_writer_free(w);
    rm_dir(dir);
}

/* A process killed mid-run (SIGKILL: no exit handlers, no close) leaves every record it wrote. */
Test(tensorboard, a_killed_writer_leaves_every_record_it_wrote)
{
    if (em_test_venv_skip())
        return;
    char dir[64];
    make_dir(dir);
    fflush(NULL);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        em_tb_writer *w = em_tb_writer_new(dir);
        for (int s = 0; w && s < 25; s++)
            em_tb_writer_add_scalar(w, "loss", loss_at(s), s);
        raise(SIGKILL);
    }
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    char path[512];
    cr_assert(em_test_only_file(dir, "events.out.tfevents.", path, sizeof path), "%s", dir);
    char *out = read_back(path);
    cr_expect_eq(count_lines(out), 26, "the file_version record and 25 losses:\n%s", out);
    char *last = strstr(out, "scalar 24 ");
    int step = -1;
    double v = 0;
    cr_assert_not_null(last, "%s", out);
    cr_assert_eq(sscanf(last, "scalar %d loss %lf", &step, &v), 2, "%s", last);
    cr_expect_eq(v, (double)(float)loss_at(24));
    free(out);
    rm_dir(dir);
}

Test(tensorboard, bad_input_is_a_clear_error_and_writes_nothing)
{
    cr_expect_null(em_tb_writer_new("/proc/ember/logs"));
    cr_expect_eq(em_error_status(), EM_ERR_IO);
    cr_expect(strstr(em_error(), "/proc/ember") != NULL, "%s", em_error());
    em_error_clear();
    char dir[64], file_as_dir[128];
    make_dir(dir);
    snprintf(file_as_dir, sizeof file_as_dir, "%s/file", dir);
    FILE *f = fopen(file_as_dir, "w");
    fclose(f);
    cr_expect_null(em_tb_writer_new(file_as_dir));
    cr_expect(strstr(em_error(), "is not a directory") != NULL, "%s", em_error());
    em_error_clear();
    char under_file[160], missing[160], check[512];
    snprintf(under_file, sizeof under_file, "%s/file/run", dir);
    cr_expect_eq(em_tb_writer_check(under_file), EM_ERR_IO);
    snprintf(check, sizeof check, "em_tb_writer_check: log directory '%s': '%s' is not a directory",
             under_file, file_as_dir);
    cr_expect_str_eq(em_error(), check);
    em_error_clear();
    snprintf(missing, sizeof missing, "%s/runs/a", dir);
    cr_expect_eq(em_tb_writer_check(missing), EM_OK, "%s", em_error());
    cr_expect_eq(access(missing, F_OK), -1, "the check makes nothing");
    cr_expect_eq(em_tb_writer_check(dir), EM_OK, "%s", em_error());
    cr_expect_eq(em_tb_writer_check(""), EM_ERR_ARG);
    em_error_clear();

    em_tb_writer *w = em_tb_writer_new(dir);
    cr_assert_not_null(w, "%s", em_error());
    float bad[3] = {1, NAN, INFINITY};
    em_tensor *t = em_from_data(EM_SHAPE(3), EM_F32, bad);
    cr_expect_eq(em_tb_writer_add_histogram(w, "grads/fc", t, 1, 0), EM_ERR_NUMERIC);
    cr_expect(strstr(em_error(), "'grads/fc' holds 2 NaN or Inf values of 3") != NULL, "%s",
              em_error());
    em_error_clear();
    em_tensor *ints = em_zeros(EM_SHAPE(3), EM_I64);
    cr_expect_eq(em_tb_writer_add_histogram(w, "ints", ints, 1, 0), EM_ERR_ARG);
    em_error_clear();
    cr_expect_eq(em_tb_writer_add_scalar(w, "", 1.0, 1), EM_ERR_ARG);
    em_error_clear();
    cr_expect_eq(em_tb_writer_records(w), 1, "only the file_version record");
    em_tb_writer_free(w);
    em_release(t);
    em_release(ints);
    rm_dir(dir);
}

/* A tag that is not UTF-8 is refused before anything is written: TensorBoard's reader would stop
 * at that record and lose every one after it. */
Test(tensorboard, a_tag_that_is_not_utf8_is_refused_and_the_rest_reads_back)
{
    if (em_test_venv_skip())
        return;
    char dir[64];
    em_tb_writer *w = writer_in_new_dir(dir);
    for (int s = 0; s < 10; s++) {
        em_status st = em_tb_writer_add_scalar(w, s == 4 ? "loss\xff" : "loss", s * 0.5, s);
        cr_assert_eq(st, s == 4 ? EM_ERR_ARG : EM_OK, "step %d: %s", s, em_error());
    }
    cr_expect(strstr(em_error(), "em_tb_writer_add_scalar: tag \"loss\" is followed by byte 0xff at "
                                 "offset 4, which is not UTF-8"), "%s", em_error());
    em_error_clear();
    char path[512];
    snprintf(path, sizeof path, "%s", em_tb_writer_path(w));
    cr_assert_eq(em_tb_writer_free(w), EM_OK);
    char *out = read_back(path);
    cr_expect_eq(count_lines(out), 1 + 9, "%s", out);
    for (int s = 0; s < 10; s++) {
        char line[64];
        snprintf(line, sizeof line, "scalar %d loss %.1f\n", s, s * 0.5);
        cr_expect_eq(strstr(out, line) != NULL, s != 4, "%s in\n%s", line, out);
    }
    free(out);
    rm_dir(dir);
}
