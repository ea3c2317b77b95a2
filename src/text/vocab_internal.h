/* The vocabulary's insides, shared by vocab.c and tokenizer.c only. */
#ifndef BERTC_VOCAB_INTERNAL_H
#define BERTC_VOCAB_INTERNAL_H

#include "text/unicode.h"
#include "text/vocab.h"

#include <stddef.h>
#include <stdint.h>

/* A table slot holds its key (the token, or for kind 1 the token after "##") when the key is short, so
 * that a lookup usually touches one cache line. 16 bytes. */
#define VOCAB_KEY_INLINE 10
#define VOCAB_KEY_LONG 0x7F
typedef struct {
    int32_t id;  /* -1: empty */
    uint8_t tag; /* top 8 bits of the mixed hash */
    uint8_t kl;  /* kind << 7 | key length, or kind << 7 | VOCAB_KEY_LONG when over VOCAB_KEY_INLINE */
    char key[VOCAB_KEY_INLINE];
} vocab_slot;

struct vocab {
    char *pool;         /* the file's bytes; each token NUL-terminated in place */
    uint32_t *off, *len;
    int n;
    int pad, unk, cls, sep, mask_id;
    int max_len[2];     /* longest token in bytes: whole (kind 0), after "##" (kind 1) */
    uint64_t file_hash;
    vocab_slot *slots;
    uint32_t mask;      /* slot count - 1 */
};

/* FNV-1a 64, one byte at a time; kind 1 (continuation "##" pieces) starts from another seed. */
static inline uint64_t vocab_hash_seed(int kind) { return kind ? 0x84222325cbf29ce4ull : 0xcbf29ce484222325ull; }
static inline uint64_t vocab_hash_byte(uint64_t h, unsigned char b) { return (h ^ b) * 0x100000001b3ull; }
/* FNV's low bits mix poorly; the table index takes the mixed value. */
static inline uint64_t vocab_hash_final(uint64_t h)
{
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

static inline void vocab_prefetch(const vocab *v, uint64_t h)
{
    __builtin_prefetch(&v->slots[vocab_hash_final(h) & v->mask]);
}

/* id of s[0..len) (kind 0) or of "##" + s[0..len) (kind 1), given h = its hash; -1 when absent. */
int vocab_find_kind(const vocab *v, uint64_t h, const char *s, size_t len, int kind);
int vocab_mask(const vocab *v);

#endif
