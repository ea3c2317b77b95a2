/* The options that several commands take, parsed here and nowhere else:
 * one parser per option, shared by every command that takes it, so a bad
 * value gets the same message in each ("CMD --OPTION: 'VALUE' is not one
 * of ...", ERR_INPUT: exit 2). The library takes the parsed values (enums,
 * and a path for --resume PATH). */
#ifndef BERTC_CLI_OPTIONS_H
#define BERTC_CLI_OPTIONS_H

#include "backend/select.h"
#include "model/bert.h"
#include "train/trainer.h"

/* --device auto|cpu|cuda */
int cli_parse_device(const char *cmd, const char *s, device_kind *out);
/* --precision auto|fp32|tf32|fp16|bf16 */
int cli_parse_precision(const char *cmd, const char *s, precision_kind *out);
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

#endif
