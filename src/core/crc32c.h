/* CRC-32C (Castagnoli), as used by checkpoints, the features cache and
 * TensorBoard's TFRecord framing. Hardware instruction when the CPU has it. */
#ifndef BERTC_CRC32C_H
#define BERTC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Start with crc = 0; feed pieces in order. */
uint32_t crc32c_update(uint32_t crc, const void *buf, size_t n);
static inline uint32_t crc32c(const void *buf, size_t n) { return crc32c_update(0, buf, n); }
/* TFRecord's masked CRC: rotate right by 15 and add a constant. */
static inline uint32_t crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
/* CRC-32C of a whole file; ERR_* code on failure. */
int crc32c_file(const char *path, uint32_t *out);

#endif
