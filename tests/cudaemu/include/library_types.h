/* cudaemu's library_types.h: the element types that cuBLASLt's layouts and
 * scale types name, with CUDA's values (only the three bertc uses). */
#ifndef CUDAEMU_LIBRARY_TYPES_H
#define CUDAEMU_LIBRARY_TYPES_H

typedef enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_16F = 2,
    CUDA_R_16BF = 14
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;

#endif
