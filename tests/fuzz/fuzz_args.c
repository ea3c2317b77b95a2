/* args_parse on an argv split from the input (at NUL bytes and newlines),
 * with a table holding every option type, ranges and required options as
 * the subcommands use them; with and without positional arguments. It
 * returns 0, ARGS_HELP or ERR_INPUT with a message, and what it sets is
 * inside the ranges. */
#include "fuzz.h"
#include "core/args.h"

#include <math.h>

FUZZ_QUIET_INIT

static int run(int argc, char **argv, int want_positional)
{
    int epochs = 2, flag = 0, shuffle = 1, seen_seed = 0, any = 0;
    int64_t steps = -1, seed = 42, mem = 0;
    double lr = 3e-5, warm = 0.1;
    const char *model = NULL, *out = NULL;
    const arg_spec specs[] = {
        {"model", ARG_STR, &model, "DIR", "model dir", .required = 1},
        {"out", ARG_STR, &out, "FILE", "output"},
        {"epochs", ARG_INT, &epochs, "N", "epochs", .min = 1, .max = 1000},
        {"any-int", ARG_INT, &any, "N", "no range"},
        {"max-steps", ARG_I64, &steps, "N", "steps", .min = -1, .max = 1e12},
        {"seed", ARG_I64, &seed, "N", "seed", .seen = &seen_seed},
        {"lr", ARG_DOUBLE, &lr, "X", "rate", .min = 0, .max = 1},
        {"warmup", ARG_DOUBLE, &warm, "X", "fraction or steps"},
        {"gpu-mem", ARG_SIZE, &mem, "SIZE", "bytes"},
        {"verbose", ARG_FLAG, &flag, NULL, "flag"},
        {"no-shuffle", ARG_FLAG_OFF, &shuffle, NULL, "flag off"},
        {0},
    };
    char **pos = NULL;
    int npos = 0;
    int rc = args_parse("fuzz", "bertc fuzz --model DIR [options]", specs, argc, argv,
                        want_positional ? &pos : NULL, want_positional ? &npos : NULL);
    FUZZ_ASSERT(rc == 0 || rc == ARGS_HELP || rc == ERR_INPUT, "args_parse returned %d", rc);
    if (rc == ERR_INPUT) fuzz_check_rc(rc, "args_parse");
    if (rc == 0) {
        FUZZ_ASSERT(model != NULL, "required --model missing but accepted");
        FUZZ_ASSERT(epochs >= 1 && epochs <= 1000, "epochs %d", epochs);
        FUZZ_ASSERT(steps >= -1 && steps <= 1000000000000LL, "max-steps %lld", (long long)steps);
        FUZZ_ASSERT(lr >= 0 && lr <= 1 && !isnan(lr), "lr %g", lr);
        FUZZ_ASSERT(mem >= 0, "gpu-mem %lld", (long long)mem);
        FUZZ_ASSERT(flag == 0 || flag == 1, "flag %d", flag);
        if (want_positional) {
            FUZZ_ASSERT(npos >= 0 && npos < argc, "npos %d of %d", npos, argc);
            for (int i = 0; i < npos; i++) FUZZ_ASSERT(pos[i] != NULL, "positional %d", i);
            free(pos);
        }
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    FUZZ_ASSERT(buf, "malloc");
    if (size) memcpy(buf, data, size);
    buf[size] = 0;
    int argc = 1;
    for (size_t i = 0; i < size; i++)
        if (buf[i] == 0 || buf[i] == '\n') argc++;
    char **argv = calloc((size_t)argc + 2, sizeof *argv);
    FUZZ_ASSERT(argv, "calloc");
    argv[0] = "fuzz";
    int k = 1;
    char *p = buf;
    for (size_t i = 0; i <= size; i++)
        if (i == size || buf[i] == 0 || buf[i] == '\n') {
            buf[i] = 0;
            argv[k++] = p;
            p = buf + i + 1;
        }
    /* argv[argc] is NULL, as main() gets it. */
    run(k, argv, 0);
    run(k, argv, 1);
    free(argv);
    free(buf);
    return 0;
}
