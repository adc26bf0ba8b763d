/* Strict command-line parsing for the `ember` commands: `--opt VALUE` and `--opt=VALUE`, numbers
 * read whole (strtoll/strtod) and checked against a range, words checked against a list, and a
 * --help generated from the same table. A mistake ends the command with status 2 before it does
 * any work: `ember train: --lr: 'abc' is not a number`. */
#ifndef EMBER_CMD_ARGS_H
#define EMBER_CMD_ARGS_H

#include <stdbool.h>
#include <math.h>
#include <stdio.h>

typedef enum {
    CMD_OPT_FLAG,   /* bool *: true when present; takes no value */
    CMD_OPT_INT,    /* int * */
    CMD_OPT_INT64,  /* int64_t * */
    CMD_OPT_UINT64, /* uint64_t * (no sign accepted) */
    CMD_OPT_SIZE,   /* size_t * (no sign accepted) */
    CMD_OPT_REAL,   /* double *: finite, or inf where the range allows it */
    CMD_OPT_STRING, /* const char ** */
    CMD_OPT_CHOICE, /* const char **: one of .choices */
} cmd_opt_kind;

/* Bounds of a number option; open_min/open_max exclude the bound itself. A real option takes
 * "inf" only where max is INFINITY and closed. */
typedef struct {
    double min, max;
    bool open_min, open_max;
} cmd_opt_range;
#define CMD_RANGE(lo, hi) ((cmd_opt_range){.min = (lo), .max = (hi)})
#define CMD_AT_LEAST(lo) ((cmd_opt_range){.min = (lo), .max = INFINITY, .open_max = true})
#define CMD_ABOVE(lo) \
    ((cmd_opt_range){.min = (lo), .max = INFINITY, .open_min = true, .open_max = true})

typedef struct {
    const char *name;     /* without the dashes: "lr" for --lr */
    cmd_opt_kind kind;
    void *value;          /* where the value goes; its type follows kind */
    const char *meta;     /* the value's name in the help: "X", "FILE" (choices print theirs) */
    const char *help;     /* one line */
    cmd_opt_range range;   /* numbers; all zero: any value the type holds */
    const char *choices;  /* CMD_OPT_CHOICE: the accepted words, "sgd|adam|adamw|rmsprop" */
    bool required;
    bool *given;          /* optional: set to true when the option appears */
} cmd_opt;

typedef struct {
    const char *command;      /* "ember train" */
    const char *operands;     /* the positional arguments in the usage line: "RECIPE", or NULL */
    int n_operands;           /* exactly this many positional arguments */
    bool operands_optional;   /* or none at all (the targets keep their values) */
    const char **operand;     /* receives them, in order */
    const char *about;        /* a paragraph for --help, or NULL */
    void (*more_help)(FILE *f); /* prints more help (a list of recipes), or NULL */
    const cmd_opt *opts;       /* ends with an entry whose name is NULL */
} cmd_spec;

#define CMD_MAX_OPTIONS 64 /* options one command's spec may list */
#define CMD_ARGS_RUN (-1) /* cmd_args_parse: all is well, run the command */

/* Parses argv[1..argc-1] (argv[0] is the command's own word) into the spec's targets. Returns
 * CMD_ARGS_RUN, 0 after printing --help or --version on stdout, or 2 after printing what was
 * wrong on stderr. Options and operands may come in any order; `--` ends the options. */
int cmd_args_parse(const cmd_spec *spec, int argc, char **argv);

/* Prints the spec's usage line, about text and option table. */
void cmd_args_usage(const cmd_spec *spec, FILE *f);

#endif
