#include "train/runlog.h"

#include "core/err.h"
#include "core/fileio.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The rows of text to keep: the header, then every complete row whose step
 * is <= keep_upto, stopping at the first that is not (or is damaged). */
static size_t kept_length(const char *text, size_t len, const char *header, int64_t keep_upto)
{
    size_t hl = strlen(header);
    if (len < hl + 1 || memcmp(text, header, hl) != 0 || text[hl] != '\n') return 0;
    size_t pos = hl + 1;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        if (!nl) break;
        char *end;
        errno = 0;
        long long step = strtoll(text + pos, &end, 10);
        if (end == text + pos || *end != ',' || errno || step > keep_upto) break;
        pos = (size_t)(nl - text) + 1;
    }
    return pos;
}

int runlog_open(runlog *l, const char *path, const char *header, int64_t keep_upto)
{
    memset(l, 0, sizeof *l);
    snprintf(l->path, sizeof l->path, "%s", path);
    char *text = NULL;
    size_t len = 0, keep = 0;
    if (keep_upto >= 0 && path_exists(path)) {
        int rc = file_read_all(path, &text, &len);
        if (rc) return rc;
        keep = kept_length(text, len, header, keep_upto);
    }
    if (keep == 0) {
        free(text);
        size_t hl = strlen(header);
        text = malloc(hl + 2);
        if (!text) return err_set(ERR_RUNTIME, "%s: out of memory", path);
        memcpy(text, header, hl);
        text[hl] = '\n';
        keep = hl + 1;
    }
    int rc = 0;
    if (keep != len) rc = file_write_atomic(path, text, keep);
    free(text);
    if (rc) return rc;
    l->f = fopen(path, "a");
    if (!l->f) return err_set(ERR_RUNTIME, "%s: %s", path, strerror(errno));
    return 0;
}

int runlog_row(runlog *l, const char *fmt, ...)
{
    if (!l->f) return 0;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(l->f, fmt, ap);
    va_end(ap);
    fputc('\n', l->f);
    if (fflush(l->f) != 0 || ferror(l->f)) return err_set(ERR_RUNTIME, "%s: write failed: %s", l->path, strerror(errno));
    return 0;
}

int runlog_sync(runlog *l)
{
    if (!l->f) return 0;
    if (fflush(l->f) != 0 || fsync(fileno(l->f)) != 0)
        return err_set(ERR_RUNTIME, "%s: sync failed: %s", l->path, strerror(errno));
    return 0;
}

void runlog_close(runlog *l)
{
    if (l->f) fclose(l->f);
    l->f = NULL;
}
