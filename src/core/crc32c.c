#include "crc32c.h"
#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static uint32_t table[8][256];
static int table_ready;

static void table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int s = 1; s < 8; s++) table[s][i] = (table[s - 1][i] >> 8) ^ table[0][table[s - 1][i] & 0xff];
    table_ready = 1;
}

static uint32_t crc_soft(uint32_t c, const unsigned char *p, size_t n)
{
    if (!table_ready) table_init();
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
            table[3][p[4]] ^ table[2][p[5]] ^ table[1][p[6]] ^ table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
    return c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p, size_t n)
{
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--) c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

uint32_t crc32c_update(uint32_t crc, const void *buf, size_t n)
{
    uint32_t c = ~crc;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static int hw = -1;
    if (hw < 0) hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    if (hw) return ~crc_hw(c, buf, n);
#endif
    return ~crc_soft(c, buf, n);
}

int crc32c_file(const char *path, uint32_t *out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(ERR_RUNTIME, "%s: %s", path, strerror(errno));
    static _Thread_local unsigned char buf[1 << 16];
    uint32_t c = 0;
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) c = crc32c_update(c, buf, got);
    int bad = ferror(f);
    fclose(f);
    if (bad) return err_set(ERR_RUNTIME, "%s: read error", path);
    *out = c;
    return 0;
}
