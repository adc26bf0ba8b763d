/* The command-line parser of the `ember` tools (cmd/args.c): both option spellings, whole
 * numbers only, ranges, word lists, required options and operands, --help and --version. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <limits.h>
#include <stdint.h>

#include "cmd/args.h"

typedef struct {
    int epochs;
    int64_t steps;
    uint64_t seed;
    size_t budget;
    double lr, amount, norm;
    const char *optim, *save, *recipe;
    bool guard, seed_given;
} options;

static int parse(options *o, int argc, char **argv)
{
    const cmd_opt opts[] = {
        {"epochs", CMD_OPT_INT, &o->epochs, "N", "epochs", .range = CMD_AT_LEAST(1)},
        {"steps", CMD_OPT_INT64, &o->steps, "N", .help = "steps"},
        {"seed", CMD_OPT_UINT64, &o->seed, "N", "seed", .given = &o->seed_given},
        {"budget", CMD_OPT_SIZE, &o->budget, "BYTES", .help = "budget"},
        {"lr", CMD_OPT_REAL, &o->lr, "X", "learning rate", .range = CMD_ABOVE(0)},
        {"amount", CMD_OPT_REAL, &o->amount, "A", "amount",
         .range = {.min = 0, .max = 1, .open_max = true}},
        {"n", CMD_OPT_REAL, &o->norm, "N", "norm", .range = {.min = 1, .max = INFINITY}},
        {"optim", CMD_OPT_CHOICE, &o->optim, NULL, "optimizer", .choices = "sgd|adam"},
        {"save", CMD_OPT_STRING, &o->save, "FILE", "output", .required = true},
        {"guard", CMD_OPT_FLAG, &o->guard, NULL, .help = "guard"},
        {0}};
    const cmd_spec spec = {.command = "ember test", .operands = "RECIPE", .n_operands = 1,
                              .operand = &o->recipe, .opts = opts};
    return cmd_args_parse(&spec, argc, argv);
}

#define PARSE(o, ...) parse(o, sizeof((char *[]){__VA_ARGS__}) / sizeof(char *), \
                            (char *[]){__VA_ARGS__})

static void quiet(void)
{
    cr_redirect_stderr();
    cr_redirect_stdout();
}

Test(args, both_spellings_and_operands_in_any_order, .init = quiet)
{
    options o = {0};
    cr_assert_eq(PARSE(&o, "test", "--epochs=3", "cnn", "--lr", "0.5", "--save=x.st", "--guard",
                       "--optim", "adam", "--seed", "18446744073709551615", "--budget=1024",
                       "--steps", "-7", "--n", "inf"), CMD_ARGS_RUN);
    cr_assert_eq(o.epochs, 3);
    cr_assert_str_eq(o.recipe, "cnn");
    cr_assert_eq(o.lr, 0.5);
    cr_assert_str_eq(o.save, "x.st");
    cr_assert(o.guard && o.seed_given);
    cr_assert_str_eq(o.optim, "adam");
    cr_assert_eq(o.seed, UINT64_MAX);
    cr_assert_eq(o.budget, 1024);
    cr_assert_eq(o.steps, -7);
    cr_assert(isinf(o.norm));
}

Test(args, double_dash_ends_options, .init = quiet)
{
    options o = {0};
    cr_assert_eq(PARSE(&o, "test", "--save", "f", "--", "--odd-name"), CMD_ARGS_RUN);
    cr_assert_str_eq(o.recipe, "--odd-name");
}

Test(args, bad_numbers_exit_2, .init = quiet)
{
    const char *bad[][2] = {
        {"--lr", "abc"}, {"--lr", ""}, {"--lr", " 1"}, {"--lr", "1x"}, {"--lr", "nan"},
        {"--lr", "inf"}, {"--lr", "1e999"}, {"--lr", "0"}, {"--lr", "-1"},
        {"--epochs", "1.5"}, {"--epochs", "0"}, {"--epochs", "abc"}, {"--epochs", "2147483648"},
        {"--epochs", " 3"}, {"--epochs", "3 "}, {"--epochs", ""},
        {"--steps", "9223372036854775808"}, {"--seed", "-1"}, {"--seed", "18446744073709551616"},
        {"--budget", "-5"}, {"--amount", "1"}, {"--amount", "-0.1"}, {"--n", "0.5"},
        {"--optim", "bogus"}, {"--optim", "SGD"}, {"--optim", ""}, {"--save", ""}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        options o = {.epochs = 99};
        cr_assert_eq(PARSE(&o, "test", "cnn", "--save", "f", (char *)bad[i][0], (char *)bad[i][1]),
                     2, "%s '%s' was accepted", bad[i][0], bad[i][1]);
    }
}

Test(args, structural_mistakes_exit_2, .init = quiet)
{
    options o = {0};
    cr_assert_eq(PARSE(&o, "test", "cnn", "--save", "f", "--bogus"), 2);
    cr_assert_eq(PARSE(&o, "test", "cnn", "--save", "f", "-x"), 2);
    cr_assert_eq(PARSE(&o, "test", "cnn", "--save", "f", "--lr"), 2, "a missing value");
    cr_assert_eq(PARSE(&o, "test", "cnn", "--save", "--lr", "1"), 2, "an option as a value");
    cr_assert_eq(PARSE(&o, "test", "cnn", "--save", "f", "--guard=1"), 2);
    cr_assert_eq(PARSE(&o, "test", "cnn"), 2, "a required option missing");
    cr_assert_eq(PARSE(&o, "test", "--save", "f"), 2, "the operand missing");
    cr_assert_eq(PARSE(&o, "test", "cnn", "mlp", "--save", "f"), 2, "an extra operand");
}

Test(args, the_message_names_the_command_option_and_value)
{
    cr_redirect_stderr();
    options o = {0};
    cr_assert_eq(PARSE(&o, "test", "cnn", "--save", "f", "--lr", "abc"), 2);
    fflush(stderr);
    cr_assert_stderr_eq_str("ember test: --lr: 'abc' is not a number\n");
}

Test(args, range_message)
{
    cr_redirect_stderr();
    options o = {0};
    cr_assert_eq(PARSE(&o, "test", "cnn", "--save", "f", "--amount=1"), 2);
    fflush(stderr);
    cr_assert_stderr_eq_str("ember test: --amount: 1 is out of range (must be in [0, 1))\n");
}

Test(args, choice_message)
{
    cr_redirect_stderr();
    options o = {0};
    cr_assert_eq(PARSE(&o, "test", "cnn", "--save", "f", "--optim", "bogus"), 2);
    fflush(stderr);
    cr_assert_stderr_eq_str("ember test: --optim: 'bogus' is not one of sgd, adam\n");
}

Test(args, help_and_version_print_on_stdout_and_exit_0)
{
    cr_redirect_stdout();
    cr_redirect_stderr();
    options o = {0};
    cr_assert_eq(PARSE(&o, "test", "--version"), 0);
    cr_assert_eq(PARSE(&o, "test", "cnn", "--lr", "abc", "--help"), 2, "bad values come first");
    cr_assert_eq(PARSE(&o, "test", "--help"), 0, "--help needs no operand or required option");
    fflush(stdout);
    char expect[2048];
    snprintf(expect, sizeof expect, "ember %s\nusage: ember test RECIPE [options]\n\noptions:\n"
             "  --epochs N                       epochs\n"
             "  --steps N                        steps\n"
             "  --seed N                         seed\n"
             "  --budget BYTES                   budget\n"
             "  --lr X                           learning rate\n"
             "  --amount A                       amount\n"
             "  --n N                            norm\n"
             "  --optim sgd|adam                 optimizer\n"
             "  --save FILE                      output (required)\n"
             "  --guard                          guard\n"
             "  -h, --help                       show this help and exit\n"
             "  --version                        show ember's version and exit\n", EMBER_VERSION);
    cr_assert_stdout_eq_str(expect);
}

/* Integer ranges are compared in 64 bits: 2^53 + 1, which a double rounds down into the range
 * [1, 2^53], is out of it; the message gives the bounds as integers. */
Test(args, integer_ranges_are_exact_in_64_bits)
{
    cr_redirect_stderr();
    int64_t count = 0;
    const cmd_opt opts[] = {
        {"count", CMD_OPT_INT64, &count, "N", "count", .range = CMD_RANGE(1, 9007199254740992.0)},
        {"batch", CMD_OPT_INT64, &count, "N", "batch", .range = CMD_RANGE(1, INT_MAX)},
        {"open", CMD_OPT_INT64, &count, "N", "open", .range = CMD_ABOVE(0.5)},
        {0}};
    const cmd_spec spec = {.command = "ember test", .opts = opts};
    char *ok[] = {"test", "--count", "9007199254740992"};
    cr_assert_eq(cmd_args_parse(&spec, 3, ok), CMD_ARGS_RUN);
    cr_assert_eq(count, 9007199254740992);
    char *over[] = {"test", "--count", "9007199254740993"};
    cr_assert_eq(cmd_args_parse(&spec, 3, over), 2);
    char *wraps[] = {"test", "--batch", "4294967297"};
    cr_assert_eq(cmd_args_parse(&spec, 3, wraps), 2);
    char *open[] = {"test", "--open", "0"};
    cr_assert_eq(cmd_args_parse(&spec, 3, open), 2);
    cr_assert_eq(count, 9007199254740992, "a refused value changes nothing");
    fflush(stderr);
    cr_assert_stderr_eq_str(
        "ember test: --count: 9007199254740993 is out of range (must be in [1, 9007199254740992])\n"
        "ember test: --batch: 4294967297 is out of range (must be in [1, 2147483647])\n"
        "ember test: --open: 0 is out of range (must be in [1, 9223372036854775807])\n");
}
