/* cudaemu's CUB: cub::DeviceRadixSort::SortPairs, the one CUB call bertc's
 * CUDA backend makes (the word-embedding gradient, cuda_dense.cu), on the CPU
 * (C++17, header only).
 *
 * CUB's protocol: with d_temp_storage NULL the call only sets
 * temp_storage_bytes to what the sort needs (an LSB radix sort's figure:
 * the alternate key and value buffers plus histograms and tile state);
 * with storage smaller than that it fails with cudaErrorInvalidValue. The
 * sort is stable and orders keys by the bits [begin_bit, end_bit) of CUB's
 * radix form (signed integers with the sign bit flipped, so negatives come
 * first; floats in IEEE order). Every device pointer is checked with
 * cudaemu_check_device, overlapping inputs and outputs (which CUB does not
 * support) stop the run, and the temporary storage is left filled with
 * 0xFF, as scratch that holds nothing afterwards. */
#ifndef CUDAEMU_CUB_CUH
#define CUDAEMU_CUB_CUH

#include "cuda_runtime_api.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

namespace cub {

namespace cudaemu_detail {

template <size_t N> struct uint_of;
template <> struct uint_of<1> { typedef uint8_t type; };
template <> struct uint_of<2> { typedef uint16_t type; };
template <> struct uint_of<4> { typedef uint32_t type; };
template <> struct uint_of<8> { typedef uint64_t type; };

/* A key's bits in the order the radix sort sorts them as unsigned. */
template <typename K> inline uint64_t radix_form(K key)
{
    typedef typename uint_of<sizeof(K)>::type U;
    U u;
    memcpy(&u, &key, sizeof u);
    const U sign = (U)((U)1 << (sizeof(K) * 8 - 1));
    if (std::is_floating_point<K>::value) u = (u & sign) ? (U)~u : (U)(u ^ sign);
    else if (std::is_signed<K>::value) u = (U)(u ^ sign);
    return (uint64_t)u;
}

/* The temporary storage a sort of n pairs needs, in 256-byte units. */
inline size_t sort_temp_bytes(int n, size_t pair_bytes)
{
    size_t b = (size_t)n * pair_bytes + 4096;
    return (b + 255) / 256 * 256;
}

inline bool overlap(const void *p, size_t pb, const void *q, size_t qb)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return pb && qb && a < b + qb && b < a + pb;
}

} // namespace cudaemu_detail

struct DeviceRadixSort {
    template <typename K, typename V>
    static cudaError_t SortPairs(void *d_temp_storage, size_t &temp_storage_bytes, const K *keys_in, K *keys_out,
                                 const V *values_in, V *values_out, int num_items, int begin_bit = 0,
                                 int end_bit = sizeof(K) * 8, cudaStream_t stream = 0)
    {
        static_assert(std::is_arithmetic<K>::value, "radix sort keys are numbers");
        (void)stream; /* synchronous */
        const char *who = "cub::DeviceRadixSort::SortPairs";
        if (num_items < 0 || begin_bit < 0 || end_bit > (int)sizeof(K) * 8 || begin_bit > end_bit)
            return cudaErrorInvalidValue;
        size_t need = cudaemu_detail::sort_temp_bytes(num_items, sizeof(K) + sizeof(V));
        if (!d_temp_storage) {
            temp_storage_bytes = need;
            return cudaSuccess;
        }
        if (temp_storage_bytes < need) return cudaErrorInvalidValue;

        size_t n = (size_t)num_items, kb = n * sizeof(K), vb = n * sizeof(V);
        cudaemu_check_device(d_temp_storage, need, who, "d_temp_storage");
        if (n) {
            cudaemu_check_device(keys_in, kb, who, "d_keys_in");
            cudaemu_check_device(keys_out, kb, who, "d_keys_out");
            cudaemu_check_device(values_in, vb, who, "d_values_in");
            cudaemu_check_device(values_out, vb, who, "d_values_out");
        }
        /* what the sort writes must not overlap anything else it touches */
        struct region {
            const void *p;
            size_t bytes;
            const char *name;
            bool written;
        } r[5] = {{keys_in, kb, "d_keys_in", false},
                  {values_in, vb, "d_values_in", false},
                  {keys_out, kb, "d_keys_out", true},
                  {values_out, vb, "d_values_out", true},
                  {d_temp_storage, need, "d_temp_storage", true}};
        for (int i = 0; i < 5; i++)
            for (int j = i + 1; j < 5; j++)
                if ((r[i].written || r[j].written) && cudaemu_detail::overlap(r[i].p, r[i].bytes, r[j].p, r[j].bytes))
                    cudaemu_fatal("%s: %s overlaps %s (in-place sorting is not supported)", who, r[i].name,
                                  r[j].name);

        /* the key digits [begin_bit, end_bit), sorted stably */
        int bits = end_bit - begin_bit;
        uint64_t mask = bits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << bits) - 1;
        std::vector<uint64_t> digits(n);
        for (size_t i = 0; i < n; i++)
            digits[i] = bits ? (cudaemu_detail::radix_form(keys_in[i]) >> begin_bit) & mask : 0;
        std::vector<size_t> order(n);
        std::iota(order.begin(), order.end(), (size_t)0);
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return digits[a] < digits[b]; });
        for (size_t i = 0; i < n; i++) {
            keys_out[i] = keys_in[order[i]];
            values_out[i] = values_in[order[i]];
        }
        memset(d_temp_storage, 0xFF, need);
        cudaemu_mark_written(keys_out, kb); /* for the race check's "never written" */
        cudaemu_mark_written(values_out, vb);
        cudaemu_check_guards(who);
        return cudaSuccess;
    }
};

} // namespace cub

#endif
