/* test_cudaemu_lt: cudaemu's cuBLASLt (cudaemu_lt.cc) and CUB
 * (include/cub/cub.cuh) stand-ins.
 *
 * cuBLASLt: products for fp32, tf32, fp16 and bf16 inputs, every transpose
 * pair, leading dimensions past the rows, strided batches, alpha and beta
 * (beta 0 with NaN in C), in place and not, against a double-precision loop
 * on the same rounded inputs; the memory past each column and between
 * batches left alone; the argument checks (ld < rows, shapes that do not
 * chain, batch counts, type combinations, attribute sizes, a pointer that
 * breaks the alignment the preference promised); an operand one element
 * short or on the host stopping the run. Calls go as cuda_gemm makes them
 * (src/backend/cuda/cuda_gemm.cu).
 *
 * CUB: SortPairs's temporary-size protocol (within bertc's planner bound,
 * too small refused), a stable sort of signed keys, a bit range, float
 * keys, the scratch left 0xFF.
 *
 * Device memory is every buffer's exact extent, so a check that reaches
 * one element too far stops the run. Prints each comparison; exits 1 on a
 * failure. */
#include "cub/cub.cuh"
#include "cublasLt.h"
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime_api.h"
#include "emu_check.h"

#include "backend/cuda/cuda_ws.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

static uint32_t rng = 12345;
static float frand(void) /* in [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1 << 23) - 1.0f;
}

template <typename T> static T *upload(const std::vector<T> &h)
{
    void *d = NULL;
    if (cudaMalloc(&d, h.size() * sizeof(T)) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        exit(1);
    }
    cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
    return (T *)d;
}

template <typename T> static std::vector<T> download(const T *d, size_t n)
{
    std::vector<T> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
}

/* ------------------------------------------------------------------------
 * cuBLASLt. */

static cublasLtHandle_t lt;

/* One matrix operand: its layout and where it lies. */
struct operand {
    cudaDataType_t type;
    int rows, cols, ld, batch;
    long long stride;
    size_t elems() const { return (size_t)(batch - 1) * stride + (size_t)(cols - 1) * ld + rows; }
    size_t esz() const { return type == CUDA_R_32F ? 4 : 2; }
};

/* The layout of an operand; NULL (and a failed check) when refused. */
static cublasLtMatrixLayout_t layout(const operand &o)
{
    cublasLtMatrixLayout_t l = NULL;
    if (cublasLtMatrixLayoutCreate(&l, o.type, o.rows, o.cols, o.ld) != CUBLAS_STATUS_SUCCESS) return NULL;
    if (o.batch != 1) {
        int32_t b = o.batch;
        int64_t s = o.stride;
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b);
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof s);
    }
    return l;
}

/* A GEMM as cuda_gemm makes it: descriptor, layouts, preference with the
 * operands' alignment (or `promise` bytes for all when nonzero), heuristic,
 * matmul (C and D may differ). Returns the first failing status. */
static cublasStatus_t lt_gemm(cublasComputeType_t ct, int ta, int tb, const operand &oa, const void *A,
                              const operand &ob, const void *B, const operand &oc, const void *C, const operand &od,
                              void *D, float alpha, float beta, uint32_t promise = 0)
{
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    size_t wsb = 1 << 20;
    uint32_t ua = promise ? promise : cuda_operand_align(A, oa.ld, oa.stride, oa.batch, oa.esz());
    uint32_t ub = promise ? promise : cuda_operand_align(B, ob.ld, ob.stride, ob.batch, ob.esz());
    uint32_t uc = promise ? promise : cuda_operand_align(C, oc.ld, oc.stride, oc.batch, 4);
    uint32_t ud = promise ? promise : cuda_operand_align(D, od.ld, od.stride, od.batch, 4);
    static void *ws = NULL;
    if (!ws) cudaMalloc(&ws, wsb);
    cublasStatus_t s;
#define TRY(x)                                                                                                       \
    if ((s = (x)) != CUBLAS_STATUS_SUCCESS) goto done
    TRY(cublasLtMatmulDescCreate(&op, ct, CUDA_R_32F));
    TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    s = CUBLAS_STATUS_INVALID_VALUE;
    if (!(la = layout(oa)) || !(lb = layout(ob)) || !(lc = layout(oc)) || !(ld = layout(od))) goto done;
    TRY(cublasLtMatmulPreferenceCreate(&pref));
    TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &ua, sizeof ua));
    TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ub, sizeof ub));
    TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &uc, sizeof uc));
    TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ud, sizeof ud));
    memset(&res, 0, sizeof res);
    TRY(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, ld, pref, 1, &res, &nres));
    if (nres != 1 || res.state != CUBLAS_STATUS_SUCCESS || res.workspaceSize > wsb) {
        s = CUBLAS_STATUS_NOT_SUPPORTED;
        goto done;
    }
    s = cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &beta, C, lc, D, ld, &res.algo, ws, wsb, 0);
#undef TRY
done:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return s;
}

/* Host data of an input operand in its storage type, and the values the
 * product sees (decoded; tf32-rounded for tf32). */
struct host_operand {
    std::vector<float> f32;
    std::vector<uint16_t> bits;
    std::vector<double> seen;
};

static host_operand make_input(const operand &o, bool tf32)
{
    host_operand h;
    size_t n = o.elems();
    h.seen.resize(n);
    if (o.type == CUDA_R_32F) h.f32.resize(n);
    else h.bits.resize(n);
    for (size_t i = 0; i < n; i++) {
        float x = frand();
        if (o.type == CUDA_R_32F) {
            h.f32[i] = x;
            h.seen[i] = tf32 ? cudaemu_round_tf32(x) : x;
        } else if (o.type == CUDA_R_16F) {
            h.bits[i] = cudaemu_f2h_bits(x);
            h.seen[i] = cudaemu_h2f_bits(h.bits[i]);
        } else {
            h.bits[i] = cudaemu_f2bf_bits(x);
            h.seen[i] = cudaemu_bf2f_bits(h.bits[i]);
        }
    }
    return h;
}

static void *upload_input(const host_operand &h)
{
    return h.f32.size() ? (void *)upload(h.f32) : (void *)upload(h.bits);
}

struct gemm_case {
    const char *name;
    cudaDataType_t type;
    cublasComputeType_t ct;
    int ta, tb, m, n, k;
    int pad;  /* added to every leading dimension */
    int batch;
    int gap;  /* elements between one batch's end and the next (-1: stride 0 for B) */
    float alpha, beta;
    int in_place; /* C == D */
    int nan_c;    /* C is NaN (with beta 0) */
};

static const char *type_name(cudaDataType_t t, cublasComputeType_t ct)
{
    return t == CUDA_R_16F ? "fp16" : t == CUDA_R_16BF ? "bf16" : ct == CUBLAS_COMPUTE_32F_FAST_TF32 ? "tf32" : "fp32";
}

static void run_gemm(const gemm_case &g)
{
    bool tf32 = g.ct == CUBLAS_COMPUTE_32F_FAST_TF32;
    operand oa = {g.type, g.ta ? g.k : g.m, g.ta ? g.m : g.k, (g.ta ? g.k : g.m) + g.pad, g.batch, 0};
    operand ob = {g.type, g.tb ? g.n : g.k, g.tb ? g.k : g.n, (g.tb ? g.n : g.k) + g.pad, g.batch, 0};
    operand od = {CUDA_R_32F, g.m, g.n, g.m + g.pad, g.batch, 0};
    int gap = g.gap < 0 ? 0 : g.gap;
    oa.stride = (long long)oa.ld * oa.cols + gap;
    ob.stride = g.gap < 0 ? 0 : (long long)ob.ld * ob.cols + gap;
    od.stride = (long long)od.ld * od.cols + gap;
    operand oc = od;

    host_operand ha = make_input(oa, tf32), hb = make_input(ob, tf32);
    /* C: random (NaN for nan_c) inside the matrices; D: a sentinel
     * everywhere (in place: C's values inside, the sentinel around) */
    const float sentinel = 777.0f;
    std::vector<float> hc(oc.elems(), sentinel), hd(od.elems(), sentinel);
    for (int b = 0; b < g.batch; b++)
        for (int j = 0; j < g.n; j++)
            for (int i = 0; i < g.m; i++) hc[b * oc.stride + (size_t)j * oc.ld + i] = g.nan_c ? NAN : frand();
    if (g.in_place) hd = hc;
    void *A = upload_input(ha), *B = upload_input(hb);
    float *D = upload(hd), *C = g.in_place ? D : upload(hc);

    long long before = cudaemu_lt_matmul_count();
    cublasStatus_t s = lt_gemm(g.ct, g.ta, g.tb, oa, A, ob, B, oc, C, od, D, g.alpha, g.beta);
    std::vector<float> out = download(D, od.elems());

    /* the reference, and the error against |alpha| sum |a b| + |beta c| */
    double worst = 0, worst_plain = 0;
    bool untouched = true;
    for (int b = 0; b < g.batch; b++)
        for (int j = 0; j < g.n; j++)
            for (int i = 0; i < g.m; i++) {
                double sum = 0, mag = 0, plain = 0;
                for (int p = 0; p < g.k; p++) {
                    size_t ia = b * oa.stride + (g.ta ? (size_t)i * oa.ld + p : (size_t)p * oa.ld + i);
                    size_t ib = b * ob.stride + (g.tb ? (size_t)p * ob.ld + j : (size_t)j * ob.ld + p);
                    sum += ha.seen[ia] * hb.seen[ib];
                    mag += fabs(ha.seen[ia] * hb.seen[ib]);
                    if (tf32) plain += (double)ha.f32[ia] * hb.f32[ib];
                }
                size_t ic = b * oc.stride + (size_t)j * oc.ld + i, id = b * od.stride + (size_t)j * od.ld + i;
                double c = g.beta != 0 ? (double)g.beta * hc[ic] : 0;
                double ref = g.alpha * sum + c, scale = fabs(g.alpha) * mag + fabs(c) + 1e-30;
                double err = fabs(out[id] - ref) / scale;
                worst = std::isnan(err) || std::isnan(worst) ? NAN : std::max(worst, err);
                if (tf32) worst_plain = std::max(worst_plain, fabs(out[id] - (g.alpha * plain + c)) / scale);
            }
    for (size_t e = 0; e < od.elems(); e++) {
        size_t b = e / od.stride, r = e % od.stride, j = r / od.ld, i = r % od.ld;
        if ((int)b >= g.batch || (int)j >= g.n || (int)i >= g.m)
            if (out[e] != (g.in_place ? hc[e] : sentinel)) untouched = false;
    }
    check(s == CUBLAS_STATUS_SUCCESS && worst <= 1e-5 && untouched && cudaemu_lt_matmul_count() == before + 1,
          "%-22s %s %c%c m %d n %d k %d ld +%d batch %d%s alpha %g beta %g%s%s: status %d, max rel err %.2e, "
          "outside D %s",
          g.name, type_name(g.type, g.ct), g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n, g.k, g.pad, g.batch,
          g.gap < 0 ? " (B stride 0)" : "", g.alpha, g.beta, g.in_place ? " in place" : "", g.nan_c ? " C NaN" : "",
          (int)s, worst, untouched ? "untouched" : "WRITTEN");
    if (tf32)
        check(worst_plain > 1e-5, "%-22s tf32 differs from fp32 on unrounded inputs: rel err %.2e", g.name,
              worst_plain);
    cudaFree(A);
    cudaFree(B);
    cudaFree(D);
    if (!g.in_place) cudaFree(C);
}

static void test_products(void)
{
    const cudaDataType_t types[4] = {CUDA_R_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF};
    const cublasComputeType_t cts[4] = {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_32F,
                                        CUBLAS_COMPUTE_32F};
    /* every type and transpose pair, batched, ld past the rows */
    for (int t = 0; t < 4; t++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                gemm_case g = {"transposes", types[t], cts[t], ta, tb, 5, 7, 9, 3, 2, 5, 1.0f, 1.0f, 1, 0};
                run_gemm(g);
            }
    const gemm_case cases[] = {
        /* name, type, compute, ta, tb, m, n, k, pad, batch, gap, alpha, beta, in place, NaN C */
        {"plain", CUDA_R_32F, CUBLAS_COMPUTE_32F, 0, 0, 4, 4, 4, 0, 1, 0, 1.0f, 0.0f, 1, 0},
        {"beta 0, C NaN", CUDA_R_32F, CUBLAS_COMPUTE_32F, 1, 0, 6, 5, 8, 2, 1, 0, 1.0f, 0.0f, 0, 1},
        {"beta 0, C NaN in place", CUDA_R_16F, CUBLAS_COMPUTE_32F, 0, 1, 6, 5, 8, 1, 3, 2, 2.0f, 0.0f, 1, 1},
        {"alpha, beta", CUDA_R_32F, CUBLAS_COMPUTE_32F, 1, 1, 7, 3, 11, 4, 2, 3, -0.5f, 2.0f, 0, 0},
        {"alpha, beta", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 0, 0, 3, 9, 6, 1, 3, 1, 1.5f, -1.0f, 0, 0},
        {"broadcast B", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 0, 1, 8, 6, 5, 0, 4, -1, 1.0f, 1.0f, 1, 0},
        {"linear forward", CUDA_R_16F, CUBLAS_COMPUTE_32F, 1, 0, 64, 48, 128, 0, 1, 0, 1.0f, 1.0f, 1, 0},
        {"linear backward dw", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 0, 1, 48, 32, 96, 0, 1, 0, 1.0f, 1.0f, 1, 0},
        {"attention scores", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 1, 0, 16, 16, 32, 0, 6, 0, 0.125f, 0.0f, 1, 0},
        {"wide k", CUDA_R_32F, CUBLAS_COMPUTE_32F, 0, 0, 3, 2, 1000, 0, 1, 0, 1.0f, 1.0f, 1, 0},
    };
    for (const gemm_case &g : cases) run_gemm(g);
}

static void test_tf32_rounding(void)
{
    struct {
        float in, want;
    } t[] = {
        {1.0f + 0x1p-11f, 1.0f},                       /* tie, even below */
        {1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-9f},         /* tie, even above */
        {1.0f + 0x1p-11f + 0x1p-20f, 1.0f + 0x1p-10f}, /* past the tie */
        {-1.0f - 0x1p-12f, -1.0f},
        {INFINITY, INFINITY},
        {-INFINITY, -INFINITY},
        {3.4028235e38f, INFINITY}, /* FLT_MAX rounds up past tf32's largest */
        {0x1p-130f + 0x1p-149f, 0x1p-130f}, /* subnormal: the top bits kept */
        {0x1p-140f, 0.0f},                  /* below half tf32's smallest */
    };
    bool ok = true;
    for (auto &x : t) {
        float r = cudaemu_round_tf32(x.in);
        if (r != x.want) {
            ok = false;
            printf("     tf32(%a) = %a, want %a\n", x.in, r, x.want);
        }
    }
    ok = ok && std::isnan(cudaemu_round_tf32(NAN));
    uint32_t snan = 0x7f800001u; /* a NaN whose payload is in the dropped bits */
    float fs;
    memcpy(&fs, &snan, 4);
    ok = ok && std::isnan(cudaemu_round_tf32(fs));
    check(ok, "cudaemu_round_tf32: ties to even, subnormals, overflow to inf, inf and NaN kept");
}

static cublasStatus_t layout_status(cudaDataType_t t, uint64_t rows, uint64_t cols, int64_t ld)
{
    cublasLtMatrixLayout_t l = NULL;
    cublasStatus_t s = cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld);
    if (l) cublasLtMatrixLayoutDestroy(l);
    return s;
}

static void test_refusals(void)
{
    const cublasStatus_t INVALID = CUBLAS_STATUS_INVALID_VALUE, UNSUPPORTED = CUBLAS_STATUS_NOT_SUPPORTED;
    check(layout_status(CUDA_R_32F, 8, 4, 7) == INVALID, "layout ld 7 < rows 8: INVALID_VALUE");
    check(layout_status(CUDA_R_32F, 8, 4, 8) == CUBLAS_STATUS_SUCCESS, "layout ld 8 = rows 8: accepted");
    check(cublasLtMatrixLayoutCreate(NULL, CUDA_R_32F, 1, 1, 1) == INVALID, "layout create into NULL: INVALID_VALUE");

    /* attribute sizes */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t l;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 4, 4, 4);
    cublasLtMatmulPreferenceCreate(&pref);
    int64_t wide = 1;
    int32_t narrow = 1;
    size_t ws = 0;
    uint32_t al = 16;
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide) == INVALID &&
              cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &narrow, sizeof narrow) ==
                  CUBLAS_STATUS_SUCCESS,
          "TRANSA with 8 bytes: INVALID_VALUE; TRANSB with 4: accepted");
    narrow = 2;
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &narrow, sizeof narrow) == INVALID,
          "TRANSA 2 (not N or T): INVALID_VALUE");
    check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &wide, sizeof wide) == INVALID &&
              cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &narrow,
                                               sizeof narrow) == INVALID,
          "BATCH_COUNT with 8 bytes, STRIDED_BATCH_OFFSET with 4: INVALID_VALUE");
    narrow = 0;
    check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &narrow, sizeof narrow) == INVALID,
          "BATCH_COUNT 0: INVALID_VALUE");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &al, sizeof al) ==
                  INVALID &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &ws,
                                                   sizeof ws) == INVALID &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) ==
                  CUBLAS_STATUS_SUCCESS,
          "MAX_WORKSPACE_BYTES with 4 bytes, MIN_ALIGNMENT_A with 8: INVALID_VALUE; workspace with 8: accepted");
    check(cublasLtMatmulDescSetAttribute(NULL, CUBLASLT_MATMUL_DESC_TRANSA, &narrow, sizeof narrow) == INVALID &&
              cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, NULL, 4) == INVALID,
          "set attribute on NULL, from NULL: INVALID_VALUE");
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(op);

    /* shapes, batch counts and types */
    float *A, *B, *D;
    cudaMalloc((void **)&A, 4096);
    cudaMalloc((void **)&B, 4096);
    cudaMalloc((void **)&D, 4096);
    const operand a43 = {CUDA_R_32F, 4, 3, 4, 1, 0}, b36 = {CUDA_R_32F, 3, 6, 3, 1, 0},
                  b56 = {CUDA_R_32F, 5, 6, 5, 1, 0}, d46 = {CUDA_R_32F, 4, 6, 4, 1, 0},
                  d56 = {CUDA_R_32F, 5, 6, 5, 1, 0};
    operand a43b2 = a43, d46b2 = d46;
    a43b2.batch = d46b2.batch = 2;
    a43b2.stride = 12;
    d46b2.stride = 24;
    operand h43 = a43, h36 = b36, bf36 = b36, d46h = d46;
    h43.type = h36.type = d46h.type = CUDA_R_16F;
    bf36.type = CUDA_R_16BF;
    const struct {
        cublasComputeType_t compute;
        int ta;
        operand a, b, c, d;
        cublasStatus_t want;
        const char *what;
    } shapes[] = {
        {CUBLAS_COMPUTE_32F, 0, a43, b36, d46, d46, CUBLAS_STATUS_SUCCESS, "A 4x3 B 3x6 D 4x6: accepted"},
        {CUBLAS_COMPUTE_32F, 0, a43, b56, d46, d46, INVALID, "A 4x3 B 5x6 (k 3 vs 5): INVALID_VALUE"},
        {CUBLAS_COMPUTE_32F, 1, a43, b36, d46, d46, INVALID, "A^T 3x4 B 3x6: INVALID_VALUE"},
        {CUBLAS_COMPUTE_32F, 0, a43, b36, d56, d56, INVALID, "A 4x3 B 3x6 D 5x6: INVALID_VALUE"},
        {CUBLAS_COMPUTE_32F, 0, a43, b36, d46, d56, INVALID, "C 4x6 but D 5x6: INVALID_VALUE"},
        {CUBLAS_COMPUTE_32F, 0, a43b2, b36, d46b2, d46b2, INVALID, "batch 2, 1, 2: INVALID_VALUE"},
        {CUBLAS_COMPUTE_32F_FAST_TF32, 0, h43, h36, d46, d46, UNSUPPORTED, "fp16 inputs with compute FAST_TF32: NOT_SUPPORTED"},
        {CUBLAS_COMPUTE_32F_FAST_16F, 0, a43, b36, d46, d46, UNSUPPORTED, "fp32 inputs with compute FAST_16F: NOT_SUPPORTED"},
        {CUBLAS_COMPUTE_32F, 0, h43, bf36, d46, d46, UNSUPPORTED, "fp16 A with bf16 B: NOT_SUPPORTED"},
        {CUBLAS_COMPUTE_32F, 0, h43, h36, d46h, d46h, UNSUPPORTED, "fp16 C/D: NOT_SUPPORTED"},
    };
    for (const auto &s : shapes)
        check(lt_gemm(s.compute, s.ta, 0, s.a, A, s.b, B, s.c, D, s.d, D, 1, 0) == s.want, "%s", s.what);
    {
        cublasLtMatmulDesc_t o2 = NULL;
        check(cublasLtMatmulDescCreate(&o2, CUBLAS_COMPUTE_32F, CUDA_R_16F) == CUBLAS_STATUS_SUCCESS,
              "desc with fp16 scale: created");
        cublasLtMatrixLayout_t la = layout(a43), lb = layout(b36), ld = layout(d46);
        float one = 1, zero = 0;
        check(cublasLtMatmul(lt, o2, &one, A, la, B, lb, &zero, D, ld, D, ld, NULL, NULL, 0, 0) == UNSUPPORTED,
              "matmul with fp16 scale: NOT_SUPPORTED");
        check(cublasLtMatmul(NULL, o2, &one, A, la, B, lb, &zero, D, ld, D, ld, NULL, NULL, 0, 0) ==
                  CUBLAS_STATUS_NOT_INITIALIZED,
              "matmul with NULL handle: NOT_INITIALIZED");
        check(cublasLtMatmul(lt, o2, NULL, A, la, B, lb, &zero, D, ld, D, ld, NULL, NULL, 0, 0) == INVALID,
              "matmul with NULL alpha: INVALID_VALUE");
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatmulDescDestroy(o2);
    }

    /* alignment: promise 16 bytes, hand over 4 */
    long long before = cudaemu_lt_matmul_count();
    const operand a44 = {CUDA_R_32F, 4, 4, 4, 1, 0}, a44l5 = {CUDA_R_32F, 4, 4, 5, 1, 0};
    check(lt_gemm(CUBLAS_COMPUTE_32F, 0, 0, a44, A, a44, B, a44, D, a44, D, 1, 0, 16) == CUBLAS_STATUS_SUCCESS,
          "16-byte promise, 16-byte aligned pointers: accepted");
    check(lt_gemm(CUBLAS_COMPUTE_32F, 0, 0, a44, A + 1, a44, B, a44, D, a44, D, 1, 0, 16) == INVALID,
          "16-byte promise, A 4 bytes past: INVALID_VALUE");
    check(lt_gemm(CUBLAS_COMPUTE_32F, 0, 0, a44, A, a44, B, a44, D + 2, a44, D + 2, 1, 0, 16) == INVALID,
          "16-byte promise, D 8 bytes past: INVALID_VALUE");
    check(lt_gemm(CUBLAS_COMPUTE_32F, 0, 0, a44l5, A, a44, B, a44, D, a44, D, 1, 0, 16) == INVALID,
          "16-byte promise, A's ld 5 floats: INVALID_VALUE");
    check(lt_gemm(CUBLAS_COMPUTE_32F, 0, 0, a44, A + 1, a44, B, a44, D, a44, D, 1, 0, 4) == CUBLAS_STATUS_SUCCESS,
          "4-byte promise, A 4 bytes past: accepted");
    check(cudaemu_lt_matmul_count() == before + 2, "matmul count: %lld successful of 5",
          cudaemu_lt_matmul_count() - before);
    cudaFree(A);
    cudaFree(B);
    cudaFree(D);
}

/* A matmul in a child process: its exit status (70: cudaemu stopped it). */
static int child_matmul(int short_a, int host_a)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        const operand a = {CUDA_R_32F, 8, 8, 8, 2, 64}, d = a;
        std::vector<float> h(a.elems(), 1.0f);
        float *A = upload(std::vector<float>(a.elems() - (short_a ? 1 : 0), 1.0f)), *B = upload(h), *D = upload(h);
        int devnull = open("/dev/null", 1);
        dup2(devnull, 2);
        cublasStatus_t s =
            lt_gemm(CUBLAS_COMPUTE_32F, 0, 0, a, host_a ? (void *)h.data() : (void *)A, a, B, d, D, d, D, 1, 1, 4);
        _exit(s == CUBLAS_STATUS_SUCCESS ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_memory_checks(void)
{
    int full = child_matmul(0, 0), shrt = child_matmul(1, 0), host = child_matmul(0, 1);
    check(full == 0, "batched A at its exact extent: runs (exit %d)", full);
    check(shrt == 70, "batched A one element short: stops the run (exit %d)", shrt);
    check(host == 70, "A on the host: stops the run (exit %d)", host);
}

/* ------------------------------------------------------------------------
 * CUB. */

static void test_sort(void)
{
    const char *who = "SortPairs";
    /* the size protocol: NULL storage only asks, and touches nothing */
    const int N = 1000;
    std::vector<int32_t> keys(N), vals(N);
    for (int i = 0; i < N; i++) {
        keys[i] = (int32_t)(frand() * 6); /* -5 .. 5, many equal */
        vals[i] = i;
    }
    keys[3] = INT_MIN;
    keys[4] = INT_MAX;
    keys[5] = -1;
    int32_t *kin = upload(keys), *vin = upload(vals), *kout, *vout;
    cudaMalloc((void **)&kout, N * 4);
    cudaMalloc((void **)&vout, N * 4);
    size_t need = 0;
    cudaError_t e = cub::DeviceRadixSort::SortPairs(NULL, need, (const int32_t *)kin, kout, (const int32_t *)vin,
                                                    vout, N, 0, 32, (cudaStream_t)0);
    std::vector<int32_t> untouched = download(kout, N);
    check(e == cudaSuccess && need > 0 && untouched[0] == -1 && untouched[N - 1] == -1,
          "%s query for %d int pairs: %zu bytes, nothing written", who, N, need);
    bool within = true;
    for (size_t n : {(size_t)1, (size_t)512, (size_t)1000, (size_t)123457, (size_t)1 << 22}) {
        size_t q = 0;
        cub::DeviceRadixSort::SortPairs(NULL, q, (const int32_t *)NULL, (int32_t *)NULL, (const int32_t *)NULL,
                                        (int32_t *)NULL, (int)n, 0, 32);
        within = within && q <= cuda_ws_sort_temp_bound(n) && q >= n * 8 && q % 256 == 0;
    }
    check(within, "%s need within bertc's cuda_ws_sort_temp_bound (8 N + 1 MiB), at least 8 N", who);

    void *temp;
    cudaMalloc(&temp, need);
    size_t small = need - 1;
    e = cub::DeviceRadixSort::SortPairs(temp, small, (const int32_t *)kin, kout, (const int32_t *)vin, vout, N, 0, 32);
    untouched = download(kout, N);
    check(e == cudaErrorInvalidValue && untouched[0] == -1, "%s with %zu bytes of %zu: cudaErrorInvalidValue", who,
          small, need);

    /* a stable sort of signed keys, as bertc sorts word ids */
    size_t tb = need;
    e = cub::DeviceRadixSort::SortPairs(temp, tb, (const int32_t *)kin, kout, (const int32_t *)vin, vout, N, 0, 32);
    std::vector<int> order(N);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys[a] < keys[b]; });
    std::vector<int32_t> ko = download(kout, N), vo = download(vout, N);
    bool same = true;
    for (int i = 0; i < N; i++) same = same && ko[i] == keys[order[i]] && vo[i] == order[i];
    check(e == cudaSuccess && same && ko[0] == INT_MIN && ko[N - 1] == INT_MAX,
          "%s of %d signed keys (INT_MIN .. INT_MAX, many equal): stable, negatives first", who, N);
    std::vector<unsigned char> t = download((unsigned char *)temp, need);
    check(std::all_of(t.begin(), t.end(), [](unsigned char c) { return c == 0xFF; }),
          "%s leaves its temporary storage 0xFF", who);

    /* bits [0, 4): by the low digit only, stably */
    e = cub::DeviceRadixSort::SortPairs(temp, tb, (const int32_t *)kin, kout, (const int32_t *)vin, vout, N, 0, 4);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return (keys[a] & 15) < (keys[b] & 15); });
    ko = download(kout, N);
    vo = download(vout, N);
    same = true;
    for (int i = 0; i < N; i++) same = same && ko[i] == keys[order[i]] && vo[i] == order[i];
    check(e == cudaSuccess && same, "%s by bits [0, 4): stable by the low digit", who);

    size_t big = need;
    e = cub::DeviceRadixSort::SortPairs(temp, big, (const int32_t *)kin, kout, (const int32_t *)vin, vout, N, 0, 33);
    check(e == cudaErrorInvalidValue, "%s with end_bit 33 of 32: cudaErrorInvalidValue", who);

    /* float keys in IEEE order, with double values */
    std::vector<float> fk = {2.0f, -0.0f, -INFINITY, 1.0f, 0.0f, -3.5f, INFINITY, -0.0f};
    std::vector<double> fv = {0, 1, 2, 3, 4, 5, 6, 7};
    float *fkin = upload(fk), *fkout;
    double *fvin = upload(fv), *fvout;
    cudaMalloc((void **)&fkout, fk.size() * 4);
    cudaMalloc((void **)&fvout, fv.size() * 8);
    size_t fneed = 0;
    cub::DeviceRadixSort::SortPairs(NULL, fneed, (const float *)fkin, fkout, (const double *)fvin, fvout, 8);
    void *ftemp;
    cudaMalloc(&ftemp, fneed);
    e = cub::DeviceRadixSort::SortPairs(ftemp, fneed, (const float *)fkin, fkout, (const double *)fvin, fvout, 8);
    std::vector<double> fo = download(fvout, 8), want = {2, 5, 1, 7, 4, 3, 0, 6};
    check(e == cudaSuccess && fo == want, "%s of float keys: -inf -3.5 -0 -0 0 1 2 inf, stable", who);
    cudaFree(fkin);
    cudaFree(fkout);
    cudaFree(fvin);
    cudaFree(fvout);
    cudaFree(ftemp);
    cudaFree(kin);
    cudaFree(vin);
    cudaFree(kout);
    cudaFree(vout);
    cudaFree(temp);
}

int main(void)
{
    cublasStatus_t s = cublasLtCreate(&lt);
    check(s == CUBLAS_STATUS_SUCCESS, "cublasLtCreate");
    test_tf32_rounding();
    test_products();
    test_refusals();
    test_memory_checks();
    test_sort();
    check(cublasLtDestroy(lt) == CUBLAS_STATUS_SUCCESS, "cublasLtDestroy");
    return check_summary();
}
