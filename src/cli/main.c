/* bertc: the command-line entry. Dispatches to one function per subcommand
 * (src/cli/cmd_NAME.c); only this file exits. */
#include "backend/cpu_kernels.h"
#include "core/err.h"
#include "train/supervise.h"

#include <stdio.h>
#include <string.h>

#define CMD(n) int cmd_##n(int argc, char **argv); extern const char cmd_##n##_summary[];
#include "commands.inc"
#undef CMD

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} command;

static const command commands[] = {
#define CMD(n) {#n, cmd_##n, cmd_##n##_summary},
#include "commands.inc"
#undef CMD
};
static const int ncommands = (int)(sizeof commands / sizeof commands[0]);

/* Error messages quote input text (question ids, tensor names, JSON
 * excerpts); control characters are escaped so the message stays one line. */
static void print_error(const char *msg)
{
    fputs("bertc: ", stderr);
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p == '\n') fputs("\\n", stderr);
        else if (*p == '\r') fputs("\\r", stderr);
        else if (*p == '\t') fputs("\\t", stderr);
        else if (*p < 0x20 || *p == 0x7f) fprintf(stderr, "\\x%02x", *p);
        else fputc(*p, stderr);
    }
    fputc('\n', stderr);
}

static void usage(FILE *f)
{
    fprintf(f, "bertc %s: fine-tune BERT for question answering (SQuAD format), on a GPU or CPU cores\n\n", BERTC_VERSION);
    fprintf(f, "usage: bertc COMMAND [options]     (bertc COMMAND --help for its options)\n\ncommands:\n");
    for (int i = 0; i < ncommands; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nexit codes: 0 done, 1 runtime failure, 2 bad usage or input, 75 stopped by a signal after saving\n");
    fprintf(f, "\nCPU kernels (bertc version shows the choice):\n"
               "  BERTC_CPU_ISA=auto|avx512|avx2|avx|sse  cap the instruction set (default: what the CPU and OS allow)\n"
               "  BERTC_GEMM=auto|onednn|openblas         training GEMM (auto: oneDNN at avx2+ where libdnnl is installed)\n"
               "  BERTC_ONEDNN_LIB=PATH                   the oneDNN library to load (default libdnnl.so.3, .so.2)\n"
               "  OPENBLAS_CORETYPE=CORE                  OpenBLAS's kernels (default: chosen by bertc for the level)\n");
}

int main(int argc, char **argv)
{
    /* Before anything calls BLAS: may run this program again with other kernels. */
    if (cpu_kernels_init(argc, argv) != 0) {
        print_error(err_msg());
        return ERR_INPUT;
    }
    if (argc < 2) {
        usage(stderr);
        return ERR_INPUT;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("bertc %s\n", BERTC_VERSION);
        return 0;
    }
    for (int i = 0; i < ncommands; i++) {
        if (strcmp(argv[1], commands[i].name) != 0) continue;
        err_clear();
        int rc = commands[i].fn(argc - 1, argv + 1);
        if (rc != 0 && rc != ERR_STOPPED && err_code() != 0) {
            print_error(err_msg());
            supervise_note_error(err_msg()); /* for a --supervise parent, if there is one */
        }
        return rc;
    }
    fprintf(stderr, "bertc: unknown command '%s' (see bertc --help)\n", argv[1]);
    return ERR_INPUT;
}
