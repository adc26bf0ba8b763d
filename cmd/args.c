/* Strict command-line parsing for the `ember` commands (see cmd/args.h). */
#include "cmd/args.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef EMBER_VERSION
#error "EMBER_VERSION must be defined by the build"
#endif

static bool has_range(const cmd_opt_range *r)
{
    return r->min != 0 || r->max != 0 || r->open_min || r->open_max;
}

static bool in_range(const cmd_opt_range *r, double v)
{
    if (!has_range(r))
        return true;
    return (r->open_min ? v > r->min : v >= r->min) && (r->open_max ? v < r->max : v <= r->max);
}

/* "must be >= 1", "must be in [0, 1)" */
static void describe_range(const cmd_opt_range *r, char *buf, size_t n)
{
    if (isinf(r->max))
        snprintf(buf, n, "must be %s %g", r->open_min ? ">" : ">=", r->min);
    else
        snprintf(buf, n, "must be in %c%g, %g%c", r->open_min ? '(' : '[', r->min, r->max,
                 r->open_max ? ')' : ']');
}

static bool bad_value(const cmd_spec *s, const cmd_opt *o, const char *v, const char *what)
{
    fprintf(stderr, "%s: --%s: '%s' is not %s\n", s->command, o->name, v, what);
    return false;
}

static bool out_of_range(const cmd_spec *s, const cmd_opt *o, const char *v)
{
    char why[96];
    describe_range(&o->range, why, sizeof why);
    fprintf(stderr, "%s: --%s: %s is out of range (%s)\n", s->command, o->name, v, why);
    return false;
}

/* The integers an option of a type holding [lo, hi] accepts: its range, rounded inward to
 * whole numbers, within [lo, hi]. Integers are then compared as integers, in 64 bits, so no
 * value is rounded through a double on its way to a check. */
static void int_bounds(const cmd_opt_range *r, long double lo, long double hi, long double *min,
                       long double *max)
{
    *min = lo;
    *max = hi;
    if (!has_range(r))
        return;
    long double a = r->open_min ? floorl(r->min) + 1 : ceill(r->min);
    long double b = r->open_max ? ceill(r->max) - 1 : floorl(r->max);
    *min = a > lo ? a : lo;
    *max = b < hi ? b : hi;
}

/* "ember train: --batch: 4294967297 is out of range (must be in [1, 2147483647])"; false */
static bool int_out_of_range(const cmd_spec *s, const cmd_opt *o, const char *v,
                             long double lo, long double hi)
{
    long double min, max;
    int_bounds(&o->range, lo, hi, &min, &max);
    fprintf(stderr, "%s: --%s: %s is out of range (must be in [%.0Lf, %.0Lf])\n", s->command,
            o->name, v, min, max);
    return false;
}

/* A whole base-10 integer: an optional sign (only where allowed), then digits, nothing else. */
static bool parse_integer(const cmd_spec *s, const cmd_opt *o, const char *v, bool sign_ok,
                          long long lo, long long hi, long long *out)
{
    const char *p = v + (v[0] == '+' || (sign_ok && v[0] == '-'));
    if (*p < '0' || *p > '9')
        return bad_value(s, o, v, sign_ok ? "an integer" : "a non-negative integer");
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end)
        return bad_value(s, o, v, sign_ok ? "an integer" : "a non-negative integer");
    long double min, max;
    int_bounds(&o->range, lo, hi, &min, &max);
    if (errno == ERANGE || x < min || x > max)
        return int_out_of_range(s, o, v, lo, hi);
    *out = x;
    return true;
}

static bool parse_unsigned(const cmd_spec *s, const cmd_opt *o, const char *v,
                           unsigned long long hi, unsigned long long *out)
{
    const char *p = v + (v[0] == '+');
    if (*p < '0' || *p > '9')
        return bad_value(s, o, v, "a non-negative integer");
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end)
        return bad_value(s, o, v, "a non-negative integer");
    long double min, max;
    int_bounds(&o->range, 0, hi, &min, &max);
    if (errno == ERANGE || x < min || x > max)
        return int_out_of_range(s, o, v, 0, hi);
    *out = x;
    return true;
}

static bool parse_real(const cmd_spec *s, const cmd_opt *o, const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = v[0] && !strchr(" \t\n\v\f\r", v[0]) ? strtod(v, &end) : NAN;
    if (isnan(x) || *end)
        return bad_value(s, o, v, "a number");
    bool inf_ok = x > 0 && isinf(o->range.max) && !o->range.open_max;
    if (isinf(x) && !inf_ok)
        return bad_value(s, o, v, "a finite number");
    if ((errno == ERANGE && !isinf(x)) || !in_range(&o->range, x))
        return out_of_range(s, o, v);
    *out = x;
    return true;
}

static bool parse_choice(const cmd_spec *s, const cmd_opt *o, char *v)
{
    size_t n = strlen(v);
    for (const char *c = o->choices; *c;) {
        size_t len = strcspn(c, "|");
        if (len == n && !strncmp(c, v, n)) {
            *(const char **)o->value = v;
            return true;
        }
        c += len + (c[len] == '|');
    }
    fprintf(stderr, "%s: --%s: '%s' is not one of ", s->command, o->name, v);
    for (const char *c = o->choices; *c; c++)
        if (*c == '|')
            fputs(", ", stderr);
        else
            fputc(*c, stderr);
    fputc('\n', stderr);
    return false;
}

static bool set_value(const cmd_spec *s, const cmd_opt *o, char *v)
{
    long long i;
    unsigned long long u;
    switch (o->kind) {
    case CMD_OPT_FLAG:
        *(bool *)o->value = true;
        return true;
    case CMD_OPT_INT:
        if (!parse_integer(s, o, v, true, INT_MIN, INT_MAX, &i))
            return false;
        *(int *)o->value = (int)i;
        return true;
    case CMD_OPT_INT64:
        if (!parse_integer(s, o, v, true, LLONG_MIN, LLONG_MAX, &i))
            return false;
        *(int64_t *)o->value = (int64_t)i;
        return true;
    case CMD_OPT_UINT64:
        if (!parse_unsigned(s, o, v, UINT64_MAX, &u))
            return false;
        *(uint64_t *)o->value = (uint64_t)u;
        return true;
    case CMD_OPT_SIZE:
        if (!parse_unsigned(s, o, v, SIZE_MAX, &u))
            return false;
        *(size_t *)o->value = (size_t)u;
        return true;
    case CMD_OPT_REAL:
        return parse_real(s, o, v, (double *)o->value);
    case CMD_OPT_STRING:
        if (!*v) {
            fprintf(stderr, "%s: --%s: the value is empty\n", s->command, o->name);
            return false;
        }
        *(const char **)o->value = v;
        return true;
    case CMD_OPT_CHOICE:
        return parse_choice(s, o, v);
    }
    return false;
}

static const cmd_opt *find_opt(const cmd_spec *s, const char *name, size_t len)
{
    for (const cmd_opt *o = s->opts; o && o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len))
            return o;
    return NULL;
}

static void meta_of(const cmd_opt *o, char *buf, size_t n)
{
    if (o->kind == CMD_OPT_FLAG)
        buf[0] = 0;
    else
        snprintf(buf, n, " %s", o->kind == CMD_OPT_CHOICE ? o->choices : o->meta ? o->meta : "V");
}

void cmd_args_usage(const cmd_spec *s, FILE *f)
{
    const char *open = s->operands_optional ? "[" : "", *close = s->operands_optional ? "]" : "";
    if (s->operands)
        fprintf(f, "usage: %s %s%s%s [options]\n", s->command, open, s->operands, close);
    else
        fprintf(f, "usage: %s [options]\n", s->command);
    if (s->about)
        fprintf(f, "\n%s\n", s->about);
    fprintf(f, "\noptions:\n");
    for (const cmd_opt *o = s->opts; o && o->name; o++) {
        char left[96], meta[64];
        meta_of(o, meta, sizeof meta);
        snprintf(left, sizeof left, "--%s%s", o->name, meta);
        fprintf(f, "  %-32s ", left);
        /* a help of several lines goes on under its first */
        for (const char *h = o->help ? o->help : ""; *h; h++)
            if (*h == '\n')
                fprintf(f, "\n%35s", "");
            else
                fputc(*h, f);
        fprintf(f, "%s\n", o->required ? " (required)" : "");
    }
    fprintf(f, "  %-32s %s\n  %-32s %s\n", "-h, --help", "show this help and exit", "--version",
            "show ember's version and exit");
    if (s->more_help)
        s->more_help(f);
}

/* One `--name`, `--name=value` or `--name value` at argv[*i]; false after printing why not. */
static bool take_option(const cmd_spec *s, int argc, char **argv, int *i, bool *seen)
{
    char *a = argv[*i] + 2;
    char *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    const cmd_opt *o = find_opt(s, a, len);
    if (!o) {
        fprintf(stderr, "%s: unknown option '--%.*s' (see '%s --help')\n", s->command, (int)len,
                a, s->command);
        return false;
    }
    char *v = eq ? eq + 1 : NULL;
    if (o->kind == CMD_OPT_FLAG && v) {
        fprintf(stderr, "%s: --%s takes no value\n", s->command, o->name);
        return false;
    }
    if (o->kind != CMD_OPT_FLAG && !v) {
        if (*i + 1 >= argc || !strncmp(argv[*i + 1], "--", 2)) {
            fprintf(stderr, "%s: --%s needs a value\n", s->command, o->name);
            return false;
        }
        v = argv[++*i];
    }
    seen[o - s->opts] = true;
    if (o->given)
        *o->given = true;
    return set_value(s, o, v);
}

int cmd_args_parse(const cmd_spec *s, int argc, char **argv)
{
    int n_opts = 0;
    while (s->opts && s->opts[n_opts].name)
        n_opts++;
    bool seen[CMD_MAX_OPTIONS] = {0};
    if (n_opts > CMD_MAX_OPTIONS) {
        fprintf(stderr, "%s: %d options, more than the %d a command may have\n", s->command,
                n_opts, CMD_MAX_OPTIONS);
        return 2;
    }
    int n_operands = 0;
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (!options_done && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            cmd_args_usage(s, stdout);
            return 0;
        }
        if (!options_done && !strcmp(a, "--version")) {
            printf("ember %s\n", EMBER_VERSION);
            return 0;
        }
        if (!options_done && !strcmp(a, "--")) {
            options_done = true;
            continue;
        }
        if (!options_done && a[0] == '-' && a[1] == '-') {
            if (!take_option(s, argc, argv, &i, seen))
                return 2;
            continue;
        }
        if (!options_done && a[0] == '-' && a[1]) {
            fprintf(stderr, "%s: unknown option '%s' (see '%s --help')\n", s->command, a,
                    s->command);
            return 2;
        }
        if (n_operands >= s->n_operands) {
            fprintf(stderr, "%s: unexpected argument '%s' (see '%s --help')\n", s->command, a,
                    s->command);
            return 2;
        }
        s->operand[n_operands++] = a;
    }
    if (n_operands < s->n_operands && !(n_operands == 0 && s->operands_optional)) {
        fprintf(stderr, "%s: missing %s (see '%s --help')\n", s->command, s->operands,
                s->command);
        return 2;
    }
    for (int k = 0; k < n_opts; k++)
        if (s->opts[k].required && !seen[k]) {
            char meta[64];
            meta_of(&s->opts[k], meta, sizeof meta);
            fprintf(stderr, "%s: --%s%s is required\n", s->command, s->opts[k].name, meta);
            return 2;
        }
    return CMD_ARGS_RUN;
}
