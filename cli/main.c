/* The `ember` program: the command line handed to cli_main (cli/commands.c), in the program
 * library with every subcommand. */
#include "cli/cli_internal.h"

int main(int argc, char **argv)
{
    return cli_main(argc, argv);
}
