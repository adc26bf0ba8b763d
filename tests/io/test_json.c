/* ember's JSON rules (io/json_internal.h): strict parsing with the byte and reason of the
 * first problem, reals rounded as asked, and non-finite values written as null with a flag, so
 * every JSON ember writes parses; a file saved whole or not at all. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/files.h"
#include "io/json_internal.h"

static void fresh(void)
{
    em_error_clear();
}

TestSuite(json, .init = fresh);

static char *dump_reals(const double *v, int n, int decimals)
{
    json_t *j = json_object();
    static const char *keys[] = {"a", "b", "c", "d"};
    for (int i = 0; i < n; i++)
        cr_assert_eq(em_json_set_real(j, keys[i], v[i], decimals), 0);
    char *s = em_json_dump(j);
    json_decref(j);
    cr_assert_not_null(s);
    return s;
}

Test(json, non_finite_values_are_null_and_named)
{
    char *s = dump_reals((double[]){0.25, NAN, INFINITY, -INFINITY}, 4, -1);
    cr_assert_str_eq(s, "{\"a\":0.25,\"b\":null,\"non_finite\":{\"b\":\"nan\",\"c\":\"inf\","
                        "\"d\":\"-inf\"},\"c\":null,\"d\":null}");
    json_t *back = em_json_parse("test", "summary", s, strlen(s));
    cr_assert_not_null(back, "%s", em_error());
    cr_assert(json_is_null(json_object_get(back, "b")));
    json_decref(back);
    free(s);
}

Test(json, reals_rounded_to_the_places_asked)
{
    char *s = dump_reals((double[]){0.918749, 4380.4, 69.66}, 3, 4);
    cr_assert_str_eq(s, "{\"a\":0.9187,\"b\":4380.4,\"c\":69.66}");
    free(s);
    s = dump_reals((double[]){4380.6, 0.2}, 2, 0);
    cr_assert_str_eq(s, "{\"a\":4381,\"b\":0}");
    free(s);
}

Test(json, strict_parse_names_byte_and_reason)
{
    const char *bad[][2] = {
        {"{\"a\":1,\"a\":2}", "duplicate object key"},
        {"{\"a\":1} x", "end of file expected"},
        {"{\"a\":\"\\u0000\"}", "\\u0000 is not allowed"},
        {"{\"a\":\"\xff\"}", "(not UTF-8)"},
        {"{\"a\":18446744073709551616}", "too big integer"},
        {"{\"a\":NaN}", "invalid token"},
        {"{\"a\":[1,2,]}", "unexpected token"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        em_error_clear();
        cr_assert_null(em_json_parse("em_test", "x.json", bad[i][0], strlen(bad[i][0])), "%s",
                       bad[i][0]);
        cr_assert_eq(em_error_status(), EM_ERR_IO);
        cr_assert(strncmp(em_error(), "em_test: 'x.json': corrupt JSON at byte ", 39) == 0, "%s",
                  em_error());
        cr_assert_not_null(strstr(em_error(), bad[i][1]), "%s: %s", bad[i][0], em_error());
    }
}

Test(json, deep_nesting_is_an_error_not_a_crash)
{
    size_t n = 100000;
    char *s = malloc(2 * n);
    memset(s, '[', n);
    memset(s + n, ']', n);
    cr_assert_null(em_json_parse("em_test", "deep", s, 2 * n));
    cr_assert_not_null(strstr(em_error(), "maximum parsing depth"), "%s", em_error());
    free(s);
}

/* em_json_save writes the line atomically; when the write fails (here a 16-byte file size limit
 * in a child process, so the line cannot fit) the error names the path and the folder is left
 * empty: no partial file, no temporary. */
Test(json, save_writes_the_line_or_leaves_nothing)
{
    char dir[64];
    cr_assert(em_test_make_dir(dir, sizeof dir, "ember_json_"));
    char path[128];
    snprintf(path, sizeof path, "%s/out.json", dir);
    json_t *j = json_pack("{s:s, s:i}", "recipe", "a name longer than sixteen bytes", "n", 3);
    cr_assert_eq(em_json_save(path, j), EM_OK, "%s", em_error());
    char line[128] = {0};
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    cr_assert_not_null(fgets(line, sizeof line, f));
    fclose(f);
    cr_assert_str_eq(line, "{\"recipe\":\"a name longer than sixteen bytes\",\"n\":3}\n");
    cr_assert_eq(unlink(path), 0);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &(struct rlimit){16, 16});
        em_status st = em_json_save(path, j);
        _exit(st != EM_OK && strstr(em_error(), path) ? 0 : 1);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the failed save reported no error");
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int left = 0;
    for (struct dirent *e; (e = readdir(d));)
        left += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    cr_expect_eq(left, 0, "a failed save left %d files in %s", left, dir);
    json_decref(j);
    em_test_remove_tree(dir);
}
