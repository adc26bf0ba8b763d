/* A hash table from names (strings the caller keeps alive) to numbers: tensor names in
 * safetensors files and anything else looked up by name many times. Open addressing with a
 * seed drawn per process, so no file can be made to collide its names on purpose. */
#ifndef EMBER_IO_NAME_TABLE_H
#define EMBER_IO_NAME_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct em_name_table em_name_table;

/* An empty table sized for `expected` names (it grows past them); NULL when out of memory. */
em_name_table *em_name_table_new(size_t expected);
void em_name_table_free(em_name_table *t); /* NULL is fine; the names are the caller's */
/* Adds name -> value: 1 when added, 0 when the name is there already (its value, left as it
 * was, into *existing unless NULL), -1 when out of memory. The table keeps the pointer, not a
 * copy. */
int em_name_table_add(em_name_table *t, const char *name, int64_t value, int64_t *existing);
/* The value of name into *value; false when it is not there. */
bool em_name_table_get(const em_name_table *t, const char *name, int64_t *value);

#endif
