/* Command-line options, as every bertc subcommand takes them.
 *
 * Long options only, `--name value` or `--name=value`; numbers are parsed with
 * range and overflow checks. A subcommand describes its options in a table:
 *
 *   int epochs = 2; double lr = 3e-5; const char *model = NULL; int shuffle = 1;
 *   const arg_spec specs[] = {
 *       {"model", ARG_STR, &model, "DIR", "Hugging Face model dir", .required = 1},
 *       {"epochs", ARG_INT, &epochs, "N", "training epochs", .min = 1, .max = 1000},
 *       {"lr", ARG_DOUBLE, &lr, "X", "peak learning rate", .min = 0, .max = 1},
 *       {"no-shuffle", ARG_FLAG_OFF, &shuffle, NULL, "keep the data order"},
 *       {0},
 *   };
 *   int rc = args_parse("train", "bertc train --model DIR ... [options]", specs, argc, argv, &pos, &npos);
 *   if (rc == ARGS_HELP) return 0;   // --help was printed to stdout
 *   if (rc) return rc;               // ERR_INPUT, message in err_msg()
 *
 * argv[0] is the subcommand name. Positional arguments are returned in order. */
#ifndef BERTC_ARGS_H
#define BERTC_ARGS_H

#include <stdint.h>

typedef enum {
    ARG_FLAG,     /* int, set to 1 */
    ARG_FLAG_OFF, /* int, set to 0 */
    ARG_INT,      /* int */
    ARG_I64,      /* int64_t */
    ARG_DOUBLE,   /* double */
    ARG_STR,      /* const char * (points into argv) */
    ARG_SIZE,     /* int64_t bytes: 123, 16GiB, 512MiB, 1.5GB, 800K */
} arg_type;

typedef struct {
    const char *name; /* without the leading -- */
    arg_type type;
    void *ptr;
    const char *metavar;
    const char *help;
    double min, max;  /* for numbers; both 0 means no range check */
    int required;
    int *seen;        /* optional: set to 1 when the option was given */
} arg_spec;

#define ARGS_HELP (-1)

int args_parse(const char *cmd, const char *usage, const arg_spec *specs, int argc, char **argv,
               char ***positional, int *npositional);
void args_print_help(const char *usage, const arg_spec *specs);

/* Checked number parsing, also for values that do not come from options.
 * `what` names the value in the error message. */
int parse_int64(const char *s, int64_t min, int64_t max, const char *what, int64_t *out);
int parse_double(const char *s, double min, double max, const char *what, double *out);
int parse_size(const char *s, const char *what, int64_t *out);

#endif
