/* ckpt_verify on a checkpoint dir whose MANIFEST is the input, beside two
 * real files (state.json, model.safetensors). The manifest ends with its
 * own CRC, which random bytes never match, so when the input's last line
 * looks like "end XXXXXXXX" the harness writes the right CRC there: the
 * fuzzer then reaches the line parser and the file checks. */
#include "fuzz.h"
#include "core/crc32c.h"
#include "train/ckpt.h"

static char dir[512];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    log_quiet(1);
    snprintf(dir, sizeof dir, "%s", fuzz_mkdir("step-00000001"));
    fuzz_write("step-00000001/state.json", "{\"step\": 1}\n", 12);
    fuzz_write("step-00000001/model.safetensors", "0123456789abcdef", 16);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    FUZZ_ASSERT(text, "malloc");
    if (size) memcpy(text, data, size);
    if (size >= 13 && !memcmp(text + size - 13, "end ", 4) && text[size - 1] == '\n') {
        char crc[9];
        snprintf(crc, sizeof crc, "%08x", (unsigned)crc32c(text, size - 13));
        memcpy(text + size - 9, crc, 8);
    }
    fuzz_write("step-00000001/MANIFEST", text, size);
    free(text);
    int rc = ckpt_verify(dir);
    fuzz_check_rc(rc, "ckpt_verify");
    return 0;
}
