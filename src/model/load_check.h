/* What both checkpoint readers (hf_dir.c's safetensors, tf_bert.c's
 * TensorFlow bundles) check in every tensor they read, what they say about
 * the checkpoint's tensors they do not read, and how a load ends. */
#ifndef BERTC_MODEL_LOAD_CHECK_H
#define BERTC_MODEL_LOAD_CHECK_H

#include "model/config.h"
#include "model/params.h"

#include <stddef.h>

/* 0, or ERR_INPUT naming path, the tensor and its first element of x[0..n)
 * that is not finite. */
int load_check_finite(const char *path, const char *name, const float *x, size_t n);
/* Logs (info) how many of the checkpoint's n tensors were neither used nor
 * ignored on purpose, naming the first three; name(ctx, i) is tensor i's. */
void load_log_unused(const char *path, int n, const unsigned char *used, int (*ignored)(const char *name),
                     const char *(*name)(const void *ctx, int i), const void *ctx);
/* A load's end: on rc 0 the config c and the block b become the caller's
 * (*cfg, *block); otherwise b and the table t are freed. Returns rc. */
int load_finish(int rc, const bert_config *c, float *b, param_table *t, bert_config *cfg, float **block);

#endif
