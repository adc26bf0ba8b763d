/* The gpt recipe's text: the English fortunes of Debian's fortunes package (every plain file of
 * its folder but ascii-art, in name order), cleaned to printable ASCII, tabs and newlines, its
 * vocabulary, and the 90/10 train/val split by position. bench/gpt_torch.py reads it the same
 * way. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "recipes/recipes.h"

/* a file of the corpus: a plain file, not a .dat index or .u8 link, not the ASCII art */
static bool is_corpus_file(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    if (strchr(name, '.') || !strcmp(name, "ascii-art"))
        return false;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The corpus files' names in order, or NULL with an error; *n gets their count. */
static char **corpus_files(const char *dir, int *n)
{
    DIR *d = opendir(dir);
    if (!d) {
        em_set_error(EM_ERR_IO, "gpt: cannot read the fortunes in %s (apt-get install fortunes, "
                     "or give --data DIR)", dir);
        return NULL;
    }
    char **names = NULL;
    int count = 0;
    bool ok = true;
    for (struct dirent *e; ok && (e = readdir(d));) {
        if (!is_corpus_file(dir, e->d_name))
            continue;
        char **grown = realloc(names, (size_t)(count + 1) * sizeof *names);
        ok = grown && (grown[count] = strdup(e->d_name));
        if (grown)
            names = grown;
        count += ok;
    }
    closedir(d);
    if (ok && count == 0) {
        em_set_error(EM_ERR_IO, "gpt: no fortune files in %s", dir);
        ok = false;
    } else if (!ok) {
        em_set_error(EM_ERR_MEMORY, "gpt: out of memory");
    }
    if (!ok) {
        for (int i = 0; i < count; i++)
            free(names[i]);
        free(names);
        return NULL;
    }
    qsort(names, (size_t)count, sizeof *names, by_name);
    *n = count;
    return names;
}

/* Appends file path's text, cleaned, to out (len bytes so far, room for cap): a backspace takes
 * back the character before it (overstrike), and only printable ASCII, tabs and newlines stay;
 * a file ends with a newline and a '%' line, the fortunes' separator. */
static bool append_clean(const char *path, char **out, size_t *len, size_t *cap)
{
    int64_t size = 0;
    FILE *f = em_fopen_regular("gpt", path, &size);
    if (!f)
        return false;
    size_t need = *len + (size_t)size + 3; /* a newline and "%\n" may follow */
    if (need > *cap) {
        char *grown = realloc(*out, 2 * need);
        if (!grown) {
            fclose(f);
            em_set_error(EM_ERR_MEMORY, "gpt: out of memory reading %s", path);
            return false;
        }
        *out = grown;
        *cap = 2 * need;
    }
    size_t start = *len;
    char *t = *out;
    for (int c; (c = fgetc(f)) != EOF && *len < need - 3;) {
        if (c == '\b') {
            if (*len > start)
                (*len)--;
        } else if (c == '\n' || c == '\t' || (c >= 32 && c < 127)) {
            t[(*len)++] = (char)c;
        }
    }
    bool read_ok = !ferror(f);
    fclose(f);
    if (!read_ok) {
        em_set_error(EM_ERR_IO, "gpt: error reading %s", path);
        return false;
    }
    if (*len > start && t[*len - 1] != '\n')
        t[(*len)++] = '\n';
    if (*len < start + 2 || memcmp(t + *len - 2, "%\n", 2)) {
        t[(*len)++] = '%';
        t[(*len)++] = '\n';
    }
    return true;
}

em_status recipe_gpt_text_load(const char *dir, recipe_gpt_text *t)
{
    *t = (recipe_gpt_text){0};
    dir = dir ? dir : RECIPE_FORTUNES_DIR;
    int n = 0;
    char **names = corpus_files(dir, &n);
    if (!names)
        return em_error_status();
    size_t len = 0, cap = 0;
    char *text = NULL;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        ok = ok && append_clean(path, &text, &len, &cap);
        free(names[i]);
    }
    free(names);
    if (!ok) {
        free(text);
        return em_error_status();
    }
    t->vocab = em_char_vocab_of(text, len);
    t->ids = malloc(len > 0 ? len : 1);
    if (!t->ids) {
        free(text);
        return em_set_error(EM_ERR_MEMORY, "gpt: out of memory");
    }
    em_char_vocab_encode(&t->vocab, text, len, t->ids);
    free(text);
    t->n = (int64_t)len;
    t->n_val = t->n / 10;
    t->n_train = t->n - t->n_val;
    return EM_OK;
}

void recipe_gpt_text_free(recipe_gpt_text *t)
{
    free(t->ids);
    *t = (recipe_gpt_text){0};
}
