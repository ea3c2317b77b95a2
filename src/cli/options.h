/* The options that several commands take, parsed here and nowhere else:
 * one parser per option, shared by every command that takes it, so a bad
 * value gets the same message in each ("CMD --OPTION: 'VALUE' is not one
 * of ...", ERR_INPUT: exit 2). The library takes the parsed values (enums,
 * and a path for --resume PATH). */
#ifndef BERTC_CLI_OPTIONS_H
#define BERTC_CLI_OPTIONS_H

#include "backend/select.h"
#include "core/args.h"
#include "model/bert.h"
#include "train/trainer.h"

/* --device auto|cpu|cuda */
int cli_parse_device(const char *cmd, const char *s, device_kind *out);
/* --precision auto|fp32|tf32|fp16|bf16 of a command that trains (train,
 * bench, plan): int8 is refused, naming the commands that take it. */
int cli_parse_precision(const char *cmd, const char *s, precision_kind *out);
/* The precision answers are computed in: the above and int8 (whether the
 * CPU can is backend_select's to say); opt names the option in the
 * message ("predict --precision", "train --eval-precision"). */
int cli_parse_answer_precision(const char *opt, const char *s, precision_kind *out);
/* --recompute none|layer */
int cli_parse_recompute(const char *cmd, const char *s, recompute_kind *out);
/* --packing none|varlen */
int cli_parse_packing(const char *cmd, const char *s, packing_kind *out);
const char *cli_packing_name(packing_kind p);
/* --resume auto|never|PATH: any other value is a PATH, *path = s (else
 * NULL); the trainer checks the checkpoint there when the run starts. */
void cli_parse_resume(const char *s, resume_kind *out, const char **path);
/* --pipeline-split B0,B1,...,BS with --pipeline-stages `stages`: the S + 1
 * layer boundaries into split (room for PIPE_MAX_STAGES + 1), *n their
 * count; whether they fit the model is checked when it is loaded. */
int cli_parse_pipeline_split(const char *cmd, const char *s, int stages, int *split, int *n);

/* The options of the commands that answer questions with a model (ask,
 * predict, serve): the window, given as arg_spec entries and checked
 * after parsing, and the device the forward pass runs on. */
typedef struct {
    int T, stride;             /* --max-seq-length, --doc-stride */
    int T_given, stride_given; /* whether each was on the command line */
} cli_window;
#define CLI_WINDOW_DEFAULT {.T = 384, .stride = 128}
#define CLI_WINDOW_SPECS(w)                                                                                                 \
    {"max-seq-length", ARG_INT, &(w)->T, "N", "tokens per window (default 384, or the model's max_position_embeddings when smaller)", \
     .min = 8, .max = 8192, .seen = &(w)->T_given},                                                                           \
    {"doc-stride", ARG_INT, &(w)->stride, "N", "overlap of context windows, in tokens (default 128; T / 4 with a shorter default T)", \
     .min = 0, .max = 8191, .seen = &(w)->stride_given}
/* ERR_INPUT when a stride given or implied by a given T is not below T. */
int cli_check_window(const char *cmd, const cli_window *w);

typedef struct {
    const char *device, *precision; /* --device, --precision */
    int gpu;                        /* --gpu */
} cli_device;
#define CLI_DEVICE_DEFAULT {.device = "auto", .precision = "auto"}
#define CLI_DEVICE_SPECS(d)                                                                                  \
    {"device", ARG_STR, &(d)->device, "D", "auto|cpu|cuda (auto: the GPU when there is a usable one)", .min = 0}, \
    {"precision", ARG_STR, &(d)->precision, "P", "auto|fp32|tf32|fp16|bf16|int8 (the CPU answers in fp32 (auto), bf16 with AVX512-BF16, int8 with AVX512-VNNI; the QA head stays fp32)", .min = 0}, \
    {"gpu", ARG_INT, &(d)->gpu, "N", "the CUDA device to use", .min = 0, .max = 1023}
/* The backend options of a command that answers questions: d's device,
 * precision and GPU, `threads` CPU threads, and batch-invariant products,
 * so that a question's answers do not depend on the other windows in its
 * batch. */
int cli_answer_backend_opts(const char *cmd, const cli_device *d, int threads, backend_opts *out);

/* The API key of an HTTP server (serve, train --http): --api-key KEY,
 * --api-key-file PATH (one line; a trailing newline is dropped) or, when
 * neither is given, the environment variable BERTC_API_KEY. Given as
 * arg_spec entries (`what`: the requests that need it, e.g. "every
 * request but GET /health"); cli_api_key reads and checks it after parsing. */
typedef struct {
    const char *key, *file; /* --api-key, --api-key-file */
} cli_api_key_opts;
#define CLI_API_KEY_ENV "BERTC_API_KEY"
#define CLI_API_KEY_SPECS(a, what)                                                                                     \
    {"api-key", ARG_STR, &(a)->key, "KEY", what " needs the header 'Authorization: Bearer KEY' (a browser: open "    \
     "the page as /?key=KEY); a key on the command line is visible to other users (ps): prefer --api-key-file or "    \
     "the environment variable " CLI_API_KEY_ENV, .min = 0},                                                          \
    {"api-key-file", ARG_STR, &(a)->file, "PATH", "the API key from the first line of PATH (readable by you alone, "  \
     "e.g. made with: openssl rand -hex 32 > PATH; chmod 600 PATH)", .min = 0}
/* *key = the key (malloc'ed; NULL when none was given), *source = where it
 * came from ("--api-key", "--api-key-file" or "BERTC_API_KEY"; NULL with
 * no key; source may be NULL). ERR_INPUT naming cmd, the option
 * and the file for both options at once, a file that cannot be read, an
 * empty key (BERTC_API_KEY set but empty included) or bytes a key cannot
 * hold (apikey.h). */
int cli_api_key(const char *cmd, const cli_api_key_opts *a, char **key, const char **source);
/* The one warning line of a server that listens beyond loopback (bind is
 * not 127.x or ::1) with no API key; `what` names it ("serve --bind"). */
void cli_warn_open_bind(const char *what, const char *bind, int have_key);

/* args_parse for a command that takes one run directory and options: rc
 * as args_parse returns it (ARGS_HELP included), and ERR_INPUT naming cmd
 * unless exactly one positional argument was given; on 0, *run is it (one
 * of argv's strings). */
int cli_parse_run(const char *cmd, const char *usage, const arg_spec *specs, int argc, char **argv, const char **run);

#endif
