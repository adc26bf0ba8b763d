/* The name table (see io/name_table.h): linear probing over a power-of-two array at most half
 * full, each slot keeping its name's hash so that probes compare strings only on a match. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "io/name_table.h"

typedef struct {
    const char *name; /* NULL: empty */
    uint64_t hash;
    int64_t value;
} slot;

struct em_name_table {
    slot *slots;
    size_t cap, count; /* cap a power of two, count <= cap / 2 */
};

static uint64_t seed;

/* The process's seed, drawn at the first table (two threads drawing at once draw alike). */
static uint64_t hash_seed(void)
{
    uint64_t s = __atomic_load_n(&seed, __ATOMIC_RELAXED);
    if (s)
        return s;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s)
        s = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(uintptr_t)&seed;
    s |= 1;
    __atomic_store_n(&seed, s, __ATOMIC_RELAXED);
    return s;
}

/* FNV-1a over the seeded start, then murmur3's finaliser to spread the low bits. */
static uint64_t hash_name(const char *name)
{
    uint64_t h = 1469598103934665603ULL ^ hash_seed();
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

/* The index of name's slot (hash h) in slots, or of the empty slot where it would go. */
static size_t find(const slot *slots, size_t cap, const char *name, uint64_t h)
{
    size_t i = h & (cap - 1);
    while (slots[i].name && (slots[i].hash != h || strcmp(slots[i].name, name)))
        i = (i + 1) & (cap - 1);
    return i;
}

em_name_table *em_name_table_new(size_t expected)
{
    em_name_table *t = calloc(1, sizeof *t);
    size_t cap = 16;
    while (cap / 2 < expected && cap < SIZE_MAX / 4 / sizeof(slot))
        cap *= 2;
    if (t && !(t->slots = calloc(cap, sizeof *t->slots))) {
        free(t);
        return NULL;
    }
    if (t)
        t->cap = cap;
    return t;
}

void em_name_table_free(em_name_table *t)
{
    if (t)
        free(t->slots);
    free(t);
}

/* Doubles the array; false when out of memory. */
static bool grow(em_name_table *t)
{
    size_t cap = t->cap * 2;
    slot *slots = cap < SIZE_MAX / sizeof(slot) ? calloc(cap, sizeof *slots) : NULL;
    if (!slots)
        return false;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].name)
            slots[find(slots, cap, t->slots[i].name, t->slots[i].hash)] = t->slots[i];
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return true;
}

int em_name_table_add(em_name_table *t, const char *name, int64_t value, int64_t *existing)
{
    uint64_t h = hash_name(name);
    size_t i = find(t->slots, t->cap, name, h);
    if (t->slots[i].name) {
        if (existing)
            *existing = t->slots[i].value;
        return 0;
    }
    if ((t->count + 1) * 2 > t->cap) {
        if (!grow(t))
            return -1;
        i = find(t->slots, t->cap, name, h);
    }
    t->slots[i] = (slot){name, h, value};
    t->count++;
    return 1;
}

bool em_name_table_get(const em_name_table *t, const char *name, int64_t *value)
{
    size_t i = find(t->slots, t->cap, name, hash_name(name));
    if (t->slots[i].name)
        *value = t->slots[i].value;
    return t->slots[i].name != NULL;
}
