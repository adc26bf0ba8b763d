/* The name table: names map to their values, a name added twice keeps its first value, absent
 * names are not found, and the table grows past the size it was made for. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/name_table.h"

Test(name_table, adds_finds_and_keeps_the_first_value)
{
    em_name_table *t = em_name_table_new(0);
    cr_assert_not_null(t);
    int64_t v = -1, old = -1;
    cr_assert_eq(em_name_table_add(t, "fc1.weight", 7, NULL), 1);
    cr_assert_eq(em_name_table_add(t, "", 8, NULL), 1, "the empty name is a name");
    cr_assert_eq(em_name_table_add(t, "fc1.weight", 9, &old), 0);
    cr_assert_eq(old, 7);
    cr_assert(em_name_table_get(t, "fc1.weight", &v) && v == 7);
    cr_assert(em_name_table_get(t, "", &v) && v == 8);
    cr_assert_not(em_name_table_get(t, "fc1.bias", &v));
    cr_assert_not(em_name_table_get(t, "fc1.weigh", &v));
    em_name_table_free(t);
    em_name_table_free(NULL);
}

Test(name_table, grows_past_its_expected_size)
{
    enum { N = 100000 };
    char (*names)[24] = malloc(sizeof(*names) * N);
    em_name_table *t = em_name_table_new(10);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "layers.%d.w", i);
        cr_assert_eq(em_name_table_add(t, names[i], i, NULL), 1, "%s", names[i]);
    }
    for (int i = 0; i < N; i++) {
        char probe[24]; /* another copy of the name: found by its text, not its pointer */
        snprintf(probe, sizeof probe, "layers.%d.w", i);
        int64_t v = -1;
        cr_assert(em_name_table_get(t, probe, &v) && v == i, "%s: %lld", probe, (long long)v);
        snprintf(probe, sizeof probe, "layers.%d.x", i);
        cr_assert_not(em_name_table_get(t, probe, &v));
    }
    em_name_table_free(t);
    free(names);
}
