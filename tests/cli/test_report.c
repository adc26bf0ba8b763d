/* The HTML report: a page with a line chart, a bar chart and a table read back as a browser
 * takes it (tests/python/report_check.py): it parses, its SVG is well-formed, nothing is
 * fetched, points and bars sit where the axes put them, text is escaped; and an unwritable
 * path is a clear error that leaves nothing behind. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/venv.h"
#include "cmd/report.h"

Test(report, a_page_read_back_as_a_browser_takes_it)
{
    if (em_test_venv_skip())
        return;
    char path[] = "/tmp/ember_report_XXXXXX.html";
    close(mkstemps(path, 5));
    cmd_report *r = cmd_report_open(path, "ember compare cnn");
    cr_assert_not_null(r, "%s", em_error());
    double x[11], y1[11], y2[11];
    for (int i = 0; i <= 10; i++) {
        x[i] = i;
        y1[i] = i / 10.0;
        y2[i] = 1 - i / 20.0;
    }
    cmd_report_series series[] = {{"f32", x, y1, 11}, {"bf16 <autocast>", x, y2, 6}};
    cmd_report_heading(r, "Loss");
    cmd_report_line_chart(r, "training loss", "step", "loss", series, 2);
    const char *groups[] = {"f32", "bf16"};
    double values[] = {100, 50}, ratio[] = {1, 0.5};
    cmd_report_bar_chart(r, &(cmd_report_bars){.title = "samples/s", .unit = "samples/s",
                                             .ratio_of = "f32", .groups = groups, .n_groups = 2,
                                             .n_series = 1, .values = values, .ratio = ratio});
    const char *header[] = {"technique", "note"};
    const char *cells[] = {"f32", "<b>not bold</b> & fine"};
    cmd_report_table(r, header, 2, cells, 1);
    cr_assert_eq(cmd_report_close(r), EM_OK, "%s", em_error());

    char *out = em_test_venv_output("report_check.py", path);
    cr_assert_not_null(out, "the report checker failed (see above)");
    cr_expect(strstr(out, "svgs 2\n"), "%s", out);
    cr_expect(strstr(out, "external 0\n"), "%s", out);
    /* x 0..10 and y 0..1 fill the 490 x 290 plot whose corner is (70, 40) */
    cr_expect(strstr(out, "polyline 11 70.0,330.0 560.0,40.0\n"), "%s", out);
    cr_expect(strstr(out, "polyline 6 70.0,40.0 315.0,112.5\n"), "%s", out);
    /* the larger bar spans the 330 px bar area, the other half of it */
    cr_expect(strstr(out, "bar 330.0\nbar 165.0\n"), "%s", out);
    cr_expect(strstr(out, "cell <b>not bold</b> & fine\n"), "%s", out);
    free(out);
    unlink(path);
}

Test(report, an_unwritable_path_is_a_clear_error)
{
    cr_expect_null(cmd_report_open("/nonexistent/dir/report.html", "x"));
    cr_expect_eq(em_error_status(), EM_ERR_IO);
    cr_expect(strstr(em_error(), "/nonexistent/dir/report.html") != NULL, "%s", em_error());
    em_error_clear();
}
