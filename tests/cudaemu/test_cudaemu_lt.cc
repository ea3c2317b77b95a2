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

/* An epilogue's attributes; a field at its "unset" value is not set
 * (pointers NULL, ints -1). bias_at_matmul, when set, replaces the bias
 * pointer between the heuristic and the matmul. */
struct epi_args {
    uint32_t epilogue;
    void *bias, *aux;
    int64_t aux_ld, bias_stride, aux_stride;
    int32_t bias_type, aux_type;
    size_t bias_ptr_bytes; /* the attribute's size (0: sizeof(void *)) */
    void *bias_at_matmul;
};

/* A GEMM as cuda_gemm makes it: descriptor, layouts, preference with the
 * operands' alignment (or `promise` bytes for all when nonzero), heuristic,
 * matmul (C and D may differ), with an epilogue when e is given. Returns
 * the first failing status. */
static cublasStatus_t lt_gemm(cublasComputeType_t ct, int ta, int tb, const operand &oa, const void *A,
                              const operand &ob, const void *B, const operand &oc, const void *C, const operand &od,
                              void *D, float alpha, float beta, uint32_t promise = 0, const epi_args *e = NULL)
{
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t lay[4] = {NULL, NULL, NULL, NULL}; /* A, B, C, D */
    cublasLtMatmulPreference_t pref = NULL;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    size_t wsb = 1 << 20;
    /* A, B, C, D: the alignment the preference promises (cuBLASLt numbers
     * the four attributes in that order) */
    const operand *opd[4] = {&oa, &ob, &oc, &od};
    const void *ptr[4] = {A, B, C, D};
    uint32_t align[4];
    for (int i = 0; i < 4; i++) {
        const operand &o = *opd[i];
        align[i] = promise ? promise : cuda_operand_align(ptr[i], o.ld, o.stride, o.batch, o.esz());
    }
    static void *ws = NULL;
    if (!ws) cudaMalloc(&ws, wsb);
    cublasStatus_t s;
#define TRY(x)                                                                                                       \
    if ((s = (x)) != CUBLAS_STATUS_SUCCESS) goto done
    TRY(cublasLtMatmulDescCreate(&op, ct, CUDA_R_32F));
    TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (e) {
        TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e->epilogue, sizeof e->epilogue));
        if (e->bias)
            TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &e->bias,
                                               e->bias_ptr_bytes ? e->bias_ptr_bytes : sizeof e->bias));
        if (e->aux) TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &e->aux, sizeof e->aux));
        if (e->aux_ld >= 0)
            TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &e->aux_ld, sizeof e->aux_ld));
        if (e->bias_stride >= 0)
            TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &e->bias_stride,
                                               sizeof e->bias_stride));
        if (e->aux_stride >= 0)
            TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &e->aux_stride,
                                               sizeof e->aux_stride));
        if (e->bias_type >= 0)
            TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &e->bias_type,
                                               sizeof e->bias_type));
        if (e->aux_type >= 0)
            TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &e->aux_type,
                                               sizeof e->aux_type));
    }
    s = CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < 4; i++)
        if (!(lay[i] = layout(*opd[i]))) goto done;
    TRY(cublasLtMatmulPreferenceCreate(&pref));
    TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    for (int i = 0; i < 4; i++)
        TRY(cublasLtMatmulPreferenceSetAttribute(
            pref, (cublasLtMatmulPreferenceAttributes_t)(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i), &align[i],
            sizeof align[i]));
    memset(&res, 0, sizeof res);
    TRY(cublasLtMatmulAlgoGetHeuristic(lt, op, lay[0], lay[1], lay[2], lay[3], pref, 1, &res, &nres));
    if (nres != 1 || res.state != CUBLAS_STATUS_SUCCESS || res.workspaceSize > wsb) {
        s = CUBLAS_STATUS_NOT_SUPPORTED;
        goto done;
    }
    if (e && e->bias_at_matmul)
        TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &e->bias_at_matmul,
                                           sizeof e->bias_at_matmul));
    s = cublasLtMatmul(lt, op, &alpha, A, lay[0], B, lay[1], &beta, C, lay[2], D, lay[3], &res.algo, ws, wsb, 0);
#undef TRY
done:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    for (int i = 3; i >= 0; i--)
        if (lay[i]) cublasLtMatrixLayoutDestroy(lay[i]);
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
        float x = emu_frand(&rng);
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
    return h.f32.size() ? (void *)emu_upload(h.f32) : (void *)emu_upload(h.bits);
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
            for (int i = 0; i < g.m; i++) hc[b * oc.stride + (size_t)j * oc.ld + i] = g.nan_c ? NAN : emu_frand(&rng);
    if (g.in_place) hd = hc;
    void *A = upload_input(ha), *B = upload_input(hb);
    float *D = emu_upload(hd), *C = g.in_place ? D : emu_upload(hc);

    long long before = cudaemu_lt_matmul_count();
    cublasStatus_t s = lt_gemm(g.ct, g.ta, g.tb, oa, A, ob, B, oc, C, od, D, g.alpha, g.beta);
    std::vector<float> out = emu_download(D, od.elems());

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
        {CUBLAS_COMPUTE_32F, 0, h43, h36, d46h, d46h, CUBLAS_STATUS_SUCCESS, "fp16 A/B with fp16 C/D: accepted"},
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

/* ------------------------------------------------------------------------
 * Epilogues: bias, bias gradients, GELU (cuBLASLt's tanh form), with
 * 16-bit outputs, against a double loop on the rounded inputs. */

static double round_out(double v, cudaDataType_t t)
{
    if (t == CUDA_R_16F) return cudaemu_h2f_bits(cudaemu_f2h_bits((float)v));
    if (t == CUDA_R_16BF) return cudaemu_bf2f_bits(cudaemu_f2bf_bits((float)v));
    return (float)v;
}

/* One ulp of the output type, relative: the bound a correctly rounded fp32
 * value may be off by once rounded (an fp32 result off by 1e-5 may round
 * the other way). */
static double out_ulp(cudaDataType_t t)
{
    return t == CUDA_R_16F ? ldexp(1.0, -10) : t == CUDA_R_16BF ? ldexp(1.0, -7) : 0.0;
}

static double gelu_tanh_d(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double dgelu_tanh_d(double x)
{
    double c = sqrt(2.0 / M_PI), t = tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

static const char *epi_name(uint32_t e)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    case CUBLASLT_EPILOGUE_DGELU: return "DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "DGELU_BGRAD";
    case CUBLASLT_EPILOGUE_BGRADA: return "BGRADA";
    case CUBLASLT_EPILOGUE_BGRADB: return "BGRADB";
    default: return "?";
    }
}

/* A buffer of n values of type t (16-bit or fp32) from fp32 values; the
 * values it holds, decoded. */
static void *upload_typed(const std::vector<float> &v, cudaDataType_t t, std::vector<double> *seen)
{
    if (seen) seen->resize(v.size());
    if (t == CUDA_R_32F) {
        if (seen)
            for (size_t i = 0; i < v.size(); i++) (*seen)[i] = v[i];
        return emu_upload(v);
    }
    std::vector<uint16_t> b(v.size());
    for (size_t i = 0; i < v.size(); i++) {
        b[i] = t == CUDA_R_16F ? cudaemu_f2h_bits(v[i]) : cudaemu_f2bf_bits(v[i]);
        if (seen) (*seen)[i] = t == CUDA_R_16F ? cudaemu_h2f_bits(b[i]) : cudaemu_bf2f_bits(b[i]);
    }
    return emu_upload(b);
}

static std::vector<double> download_typed(const void *d, size_t n, cudaDataType_t t)
{
    std::vector<double> out(n);
    if (t == CUDA_R_32F) {
        std::vector<float> h = emu_download((const float *)d, n);
        for (size_t i = 0; i < n; i++) out[i] = h[i];
    } else {
        std::vector<uint16_t> h = emu_download((const uint16_t *)d, n);
        for (size_t i = 0; i < n; i++) out[i] = t == CUDA_R_16F ? cudaemu_h2f_bits(h[i]) : cudaemu_bf2f_bits(h[i]);
    }
    return out;
}

struct epi_case {
    cudaDataType_t in, out;
    uint32_t epi;
    int ta, tb, m, n, k, batch;
    float alpha, beta;
};

static void run_epilogue(const epi_case &c)
{
    const uint32_t e = c.epi;
    bool reads_bias = e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
                      e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    bool bgrad = e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    bool gelu = e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    bool aux_out = e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    bool dgelu = e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    operand oa = {c.in, c.ta ? c.k : c.m, c.ta ? c.m : c.k, (c.ta ? c.k : c.m) + 1, c.batch, 0};
    operand ob = {c.in, c.tb ? c.n : c.k, c.tb ? c.k : c.n, (c.tb ? c.n : c.k) + 2, c.batch, 0};
    operand od = {c.out, c.m, c.n, c.m + 3, c.batch, 0};
    oa.stride = (long long)oa.ld * oa.cols + 5;
    ob.stride = (long long)ob.ld * ob.cols + 3;
    od.stride = (long long)od.ld * od.cols + 7;
    host_operand ha = make_input(oa, false), hb = make_input(ob, false);
    void *A = upload_input(ha), *B = upload_input(hb);
    std::vector<float> cv(od.elems());
    for (float &x : cv) x = emu_frand(&rng);
    std::vector<double> cseen;
    void *C = upload_typed(cv, c.out, &cseen);
    void *D = upload_typed(std::vector<float>(od.elems(), 777.0f), c.out, NULL);

    int blen = e == CUBLASLT_EPILOGUE_BGRADB ? c.n : c.m;
    int64_t bstride = blen + 4, aux_ld = ((c.m + 7) / 8) * 8 + 8, xstride = aux_ld * c.n + 16;
    size_t nbias = (size_t)(c.batch - 1) * bstride + blen, naux = (size_t)(c.batch - 1) * xstride + (size_t)(c.n - 1) * aux_ld + c.m;
    std::vector<float> bv(nbias), xv(naux);
    for (float &x : bv) x = emu_frand(&rng);
    for (float &x : xv) x = 2.0f * emu_frand(&rng);
    std::vector<double> bseen, xseen;
    void *bias = (reads_bias || bgrad) ? upload_typed(bv, c.out, &bseen) : NULL;
    void *aux = (aux_out || dgelu) ? upload_typed(xv, c.out, &xseen) : NULL;
    epi_args ea = {e, bias, aux, (aux_out || dgelu) ? aux_ld : -1, c.batch > 1 ? bstride : -1,
                   c.batch > 1 ? xstride : -1, -1, -1, 0, NULL};

    cublasStatus_t s = lt_gemm(CUBLAS_COMPUTE_32F, c.ta, c.tb, oa, A, ob, B, od, C, od, D, c.alpha, c.beta, 0, &ea);
    std::vector<double> out = download_typed(D, od.elems(), c.out);
    std::vector<double> bout = bias ? download_typed(bias, nbias, c.out) : std::vector<double>();
    std::vector<double> xout = aux ? download_typed(aux, naux, c.out) : std::vector<double>();

    /* worst error over its bound (pass: <= 1), and the worst error */
    double worst = 0, worst_abs = 0, ulp = out_ulp(c.out);
    auto judge = [&](double got, double ref, double mag) {
        double err = fabs(got - ref), bound = ulp * fabs(ref) + 1e-5 * mag + 1e-6;
        if (std::isnan(err)) err = INFINITY;
        worst = std::max(worst, err / bound);
        worst_abs = std::max(worst_abs, err);
    };
    for (int b = 0; b < c.batch; b++) {
        std::vector<double> gref(blen, 0.0), gmag(blen, 0.0);
        for (int j = 0; j < c.n; j++)
            for (int i = 0; i < c.m; i++) {
                double sum = 0, mag = 0;
                for (int q = 0; q < c.k; q++) {
                    size_t ia = b * oa.stride + (c.ta ? (size_t)i * oa.ld + q : (size_t)q * oa.ld + i);
                    size_t ib = b * ob.stride + (c.tb ? (size_t)q * ob.ld + j : (size_t)j * ob.ld + q);
                    sum += ha.seen[ia] * hb.seen[ib];
                    mag += fabs(ha.seen[ia] * hb.seen[ib]);
                }
                size_t id = b * od.stride + (size_t)j * od.ld + i, ix = b * xstride + (size_t)j * aux_ld + i;
                double x = c.alpha * sum + (c.beta != 0 ? c.beta * cseen[id] : 0.0);
                mag = fabs(c.alpha) * mag + fabs(c.beta * cseen[id]);
                if (reads_bias) {
                    x += bseen[b * bstride + i];
                    mag += fabs(bseen[b * bstride + i]);
                }
                if (aux_out) judge(xout[ix], x, mag);
                if (gelu) x = gelu_tanh_d(x), mag *= 1.2;
                if (dgelu) x *= dgelu_tanh_d(xseen[ix]), mag *= 1.2;
                judge(out[id], x, mag);
                if (e == CUBLASLT_EPILOGUE_DGELU_BGRAD) gref[i] += x, gmag[i] += mag;
            }
        if (e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB)
            for (int r = 0; r < blen; r++)
                for (int q = 0; q < c.k; q++) {
                    double v;
                    if (e == CUBLASLT_EPILOGUE_BGRADA)
                        v = ha.seen[b * oa.stride + (c.ta ? (size_t)r * oa.ld + q : (size_t)q * oa.ld + r)];
                    else v = hb.seen[b * ob.stride + (c.tb ? (size_t)q * ob.ld + r : (size_t)r * ob.ld + q)];
                    gref[r] += v;
                    gmag[r] += fabs(v);
                }
        if (bgrad)
            for (int r = 0; r < blen; r++) judge(bout[b * bstride + r], gref[r], gmag[r]);
    }
    /* a bias gradient leaves the gaps between batches alone */
    bool gaps = true;
    if (bgrad)
        for (size_t i = 0; i < nbias; i++)
            if ((int64_t)(i % bstride) >= blen && bout[i] != round_out(bv[i], c.out)) gaps = false;
    check(s == CUBLAS_STATUS_SUCCESS && worst <= 1.0 && gaps,
          "epilogue %-13s %s in, %s out, %c%c m %d n %d k %d batch %d alpha %g beta %g: status %d, max err %.2e "
          "(%.2f of the bound: 1 ulp of the output + 1e-5 of the magnitude)%s",
          epi_name(e), type_name(c.in, CUBLAS_COMPUTE_32F), type_name(c.out, CUBLAS_COMPUTE_32F), c.ta ? 'T' : 'N',
          c.tb ? 'T' : 'N', c.m, c.n, c.k, c.batch, c.alpha, c.beta, (int)s, worst_abs, worst,
          gaps ? "" : ", a gap between batches WRITTEN");
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    cudaFree(D);
    if (bias) cudaFree(bias);
    if (aux) cudaFree(aux);
}

static void test_epilogues(void)
{
    const cudaDataType_t H = CUDA_R_16F, BF = CUDA_R_16BF, F = CUDA_R_32F;
    const epi_case cases[] = {
        /* in, out, epilogue, ta, tb, m, n, k, batch, alpha, beta */
        {H, H, CUBLASLT_EPILOGUE_DEFAULT, 1, 0, 24, 16, 40, 1, 1.0f, 0.0f},
        {BF, BF, CUBLASLT_EPILOGUE_DEFAULT, 0, 1, 9, 7, 33, 2, 0.5f, 1.0f},
        /* the linear layer's forward: D = W^T x + b */
        {H, H, CUBLASLT_EPILOGUE_BIAS, 1, 0, 24, 16, 40, 1, 1.0f, 0.0f},
        {BF, BF, CUBLASLT_EPILOGUE_BIAS, 1, 0, 17, 10, 31, 2, 1.0f, 0.0f},
        {H, F, CUBLASLT_EPILOGUE_BIAS, 0, 0, 8, 5, 12, 1, 2.0f, 1.0f},
        {BF, BF, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 1, 0, 16, 12, 24, 2, 1.0f, 0.0f},
        {H, H, CUBLASLT_EPILOGUE_DGELU, 0, 1, 16, 12, 24, 1, 1.0f, 0.0f},
        {H, H, CUBLASLT_EPILOGUE_DGELU_BGRAD, 0, 0, 13, 9, 20, 2, 1.0f, 0.0f},
        /* the weight gradient with the bias gradient: dW (+)= x dout^T, db = sum dout */
        {H, F, CUBLASLT_EPILOGUE_BGRADB, 0, 1, 24, 16, 40, 1, 1.0f, 1.0f},
        {BF, F, CUBLASLT_EPILOGUE_BGRADB, 0, 1, 11, 13, 37, 2, 1.0f, 0.0f},
        {BF, BF, CUBLASLT_EPILOGUE_BGRADB, 1, 1, 10, 6, 50, 1, 1.0f, 0.0f},
        {H, F, CUBLASLT_EPILOGUE_BGRADA, 0, 1, 14, 8, 30, 1, 1.0f, 0.0f},
        {BF, F, CUBLASLT_EPILOGUE_BGRADA, 0, 0, 7, 9, 21, 2, 1.0f, 1.0f},
    };
    for (const epi_case &c : cases) run_epilogue(c);
}

/* cuBLASLt's GELU epilogues compute the tanh approximation; bertc's model
 * (transformers' BERT, hidden_act "gelu") uses erf. How far apart they are,
 * in units of the 16-bit outputs' ulp. */
static void test_gelu_forms(void)
{
    double worst = 0, at = 0, worst_ulps_h = 0, worst_ulps_bf = 0;
    int differ_h = 0, differ_bf = 0, n = 0;
    for (double x = -8.0; x <= 8.0; x += 1.0 / 1024, n++) {
        double ex = 0.5 * x * (1.0 + erf(x / sqrt(2.0))), th = gelu_tanh_d(x);
        if (fabs(ex - th) > worst) worst = fabs(ex - th), at = x;
        double rh = round_out(ex, CUDA_R_16F), rt = round_out(th, CUDA_R_16F);
        double rb = round_out(ex, CUDA_R_16BF), rtb = round_out(th, CUDA_R_16BF);
        double uh = std::max(fabs(rh) * ldexp(1.0, -10), ldexp(1.0, -24)), ub = std::max(fabs(rb) * ldexp(1.0, -7), 1e-38);
        if (rh != rt) differ_h++, worst_ulps_h = std::max(worst_ulps_h, fabs(rh - rt) / uh);
        if (rb != rtb) differ_bf++, worst_ulps_bf = std::max(worst_ulps_bf, fabs(rb - rtb) / ub);
    }
    check(worst > 1e-4 && differ_h > 0,
          "GELU_AUX epilogues: cuBLASLt's tanh GELU vs transformers' erf GELU on [-8, 8] step 1/1024: max |diff| %.2e "
          "at x = %.3f; rounded to fp16 %d of %d values differ (up to %.0f ulps), to bf16 %d (up to %.0f ulps): "
          "not bertc's GELU, so the GELU stays a kernel of its own",
          worst, at, differ_h, n, worst_ulps_h, differ_bf, worst_ulps_bf);
}

/* A matmul with a bias gradient into a buffer one element short, in a
 * child process: its exit status (70: cudaemu stopped it). */
static int child_bgrad_short(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        const operand a = {CUDA_R_16F, 8, 8, 8, 1, 0};
        void *A = emu_upload(std::vector<uint16_t>(64, 0x3c00));
        void *B = emu_upload(std::vector<uint16_t>(64, 0x3c00));
        void *D = emu_upload(std::vector<uint16_t>(64, 0));
        void *bias = emu_upload(std::vector<uint16_t>(7, 0));
        epi_args ea = {CUBLASLT_EPILOGUE_BGRADB, bias, NULL, -1, -1, -1, -1, -1, 0, NULL};
        int devnull = open("/dev/null", 1);
        dup2(devnull, 2);
        cublasStatus_t s = lt_gemm(CUBLAS_COMPUTE_32F, 0, 1, a, A, a, B, a, D, a, D, 1, 0, 0, &ea);
        _exit(s == CUBLAS_STATUS_SUCCESS ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Planted faults in the epilogue GEMMs (issue 47's new kernel family),
 * each in a child process with cuBLASLt's error log on
 * (CUBLASLT_LOG_LEVEL=1) that fails as cuda_gemm.cu fails on a refused
 * call (exit 1): an fp16 GEMM of 10 x 6 (k 4) with the epilogue e. */
static void epilogue_child(const epi_args &e)
{
    setenv("CUBLASLT_LOG_LEVEL", "1", 1);
    const operand a = {CUDA_R_16F, 10, 4, 10, 1, 0}, b = {CUDA_R_16F, 4, 6, 4, 1, 0}, d = {CUDA_R_16F, 10, 6, 10, 1, 0};
    void *A = emu_upload(std::vector<uint16_t>(40, 0x3c00)), *B = emu_upload(std::vector<uint16_t>(24, 0x3c00));
    void *D = emu_upload(std::vector<uint16_t>(60, 0));
    cublasStatus_t s = lt_gemm(CUBLAS_COMPUTE_32F, 0, 0, a, A, b, B, d, D, d, D, 1, 0, 0, &e);
    exit(s == CUBLAS_STATUS_SUCCESS ? 0 : 1);
}

/* GELU_AUX_BIAS with the aux leading dimension of the inputs' 8 rows
 * where D has 10 (a wrong leading dimension). */
static void fault_aux_ld(void)
{
    void *bias = emu_upload(std::vector<uint16_t>(10, 0)), *aux = emu_upload(std::vector<uint16_t>(64, 0));
    epilogue_child({CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, aux, 8, -1, -1, -1, -1, 0, NULL});
}

/* The same with its right leading dimension (16): runs. */
static void fault_aux_ld_fixed(void)
{
    void *bias = emu_upload(std::vector<uint16_t>(10, 0)), *aux = emu_upload(std::vector<uint16_t>(96, 0));
    epilogue_child({CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, aux, 16, -1, -1, -1, -1, 0, NULL});
}

/* BIAS with an fp32 bias for fp16 D (a wrong bias type). */
static void fault_bias_type(void)
{
    void *bias = emu_upload(std::vector<float>(10, 0.0f));
    epilogue_child({CUBLASLT_EPILOGUE_BIAS, bias, NULL, -1, -1, -1, CUDA_R_32F, -1, 0, NULL});
}

static void epilogue_planted(const char *what, void (*fn)(void), int want_status, const char *want)
{
    std::string err;
    int st = emu_child(fn, &err);
    while (!err.empty() && err.back() == '\n') err.pop_back();
    check(st == want_status && (!want || err.find(want) != std::string::npos), "planted: %s (exit %d): %s", what, st,
          err.empty() ? "(no report)" : err.c_str());
}

static void test_epilogue_faults(void)
{
    epilogue_planted("GELU_AUX_BIAS with aux ld 16 for D's 10 rows: runs", fault_aux_ld_fixed, 0, NULL);
    epilogue_planted("GELU_AUX_BIAS with aux ld 8 for D's 10 rows: refused, the call fails", fault_aux_ld, 1,
                     "epilogue 164 refused (CUBLAS_STATUS_INVALID_VALUE): aux leading dimension 8: not at least D's "
                     "10 rows");
    epilogue_planted("BIAS with an fp32 bias for fp16 D: refused, the call fails", fault_bias_type, 1,
                     "epilogue 4 refused (CUBLAS_STATUS_NOT_SUPPORTED): bias type 0 is not D's type 2");
}

/* The output types there are kernels for: D of the inputs' 16-bit type,
 * C of D's type. */
static void test_output_types(void)
{
    const cublasStatus_t UNSUPPORTED = CUBLAS_STATUS_NOT_SUPPORTED;
    void *A, *B, *D;
    cudaMalloc(&A, 4096);
    cudaMalloc(&B, 4096);
    cudaMalloc(&D, 4096);
    const operand h43 = {CUDA_R_16F, 4, 3, 4, 1, 0}, h36 = {CUDA_R_16F, 3, 6, 3, 1, 0},
                  a43 = {CUDA_R_32F, 4, 3, 4, 1, 0}, a36 = {CUDA_R_32F, 3, 6, 3, 1, 0},
                  d46 = {CUDA_R_32F, 4, 6, 4, 1, 0}, d46h = {CUDA_R_16F, 4, 6, 4, 1, 0},
                  d46bf = {CUDA_R_16BF, 4, 6, 4, 1, 0};
    check(lt_gemm(CUBLAS_COMPUTE_32F, 0, 0, h43, A, h36, B, d46bf, D, d46bf, D, 1, 0) == UNSUPPORTED,
          "fp16 A/B with bf16 C/D: NOT_SUPPORTED");
    check(lt_gemm(CUBLAS_COMPUTE_32F, 0, 0, a43, A, a36, B, d46h, D, d46h, D, 1, 0) == UNSUPPORTED,
          "fp32 A/B with fp16 C/D: NOT_SUPPORTED");
    check(lt_gemm(CUBLAS_COMPUTE_32F, 0, 0, h43, A, h36, B, d46, D, d46h, D, 1, 0) == UNSUPPORTED,
          "fp16 A/B, fp32 C with fp16 D: NOT_SUPPORTED");
    cudaFree(A);
    cudaFree(B);
    cudaFree(D);
}

static void test_epilogue_refusals(void)
{
    const cublasStatus_t OK = CUBLAS_STATUS_SUCCESS, INVALID = CUBLAS_STATUS_INVALID_VALUE,
                         UNSUPPORTED = CUBLAS_STATUS_NOT_SUPPORTED;
    const operand a = {CUDA_R_16F, 8, 4, 8, 1, 0}, b = {CUDA_R_16F, 4, 6, 4, 1, 0}, d = {CUDA_R_16F, 8, 6, 8, 1, 0};
    const operand a10 = {CUDA_R_16F, 10, 4, 10, 1, 0}, d10 = {CUDA_R_16F, 10, 6, 10, 1, 0};
    operand a2 = a, b2 = b, d2 = d;
    a2.batch = b2.batch = d2.batch = 2;
    a2.stride = 32;
    b2.stride = 24;
    d2.stride = 48;
    uint16_t *A, *B, *D, *bias, *aux;
    cudaMalloc((void **)&A, 4096);
    cudaMalloc((void **)&B, 4096);
    cudaMalloc((void **)&D, 4096);
    cudaMalloc((void **)&bias, 4096);
    cudaMalloc((void **)&aux, 4096);
    auto run = [&](const epi_args &e, const operand &oa = operand{}, const operand &od = operand{}) {
        const operand &xa = oa.rows ? oa : a, &xd = od.rows ? od : d;
        const operand &xb = xa.batch > 1 ? b2 : b;
        return lt_gemm(CUBLAS_COMPUTE_32F, 0, 0, xa, A, xb, B, xd, D, xd, D, 1, 0, 0, &e);
    };
    const uint32_t BIAS = CUBLASLT_EPILOGUE_BIAS, GAB = CUBLASLT_EPILOGUE_GELU_AUX_BIAS, DG = CUBLASLT_EPILOGUE_DGELU;
    check(run({BIAS, bias, NULL, -1, -1, -1, -1, -1, 0, NULL}) == OK, "BIAS with an fp16 bias for fp16 D: accepted");
    check(run({BIAS, bias, NULL, -1, -1, -1, CUDA_R_16F, -1, 0, NULL}) == OK,
          "BIAS with BIAS_DATA_TYPE fp16 (D's type) set: accepted");
    check(run({BIAS, NULL, NULL, -1, -1, -1, -1, -1, 0, NULL}) == INVALID, "BIAS without a bias pointer: INVALID_VALUE");
    check(run({BIAS, bias, NULL, -1, -1, -1, CUDA_R_32F, -1, 0, NULL}) == UNSUPPORTED,
          "BIAS with BIAS_DATA_TYPE fp32 for fp16 D (a wrong bias type): NOT_SUPPORTED");
    /* the bias gradients: BGRADB with B transposed, BGRADA with A not
     * (cudaemu_lt.cc says why only those) */
    const operand bt = {CUDA_R_16F, 6, 4, 6, 1, 0}, at = {CUDA_R_16F, 4, 8, 4, 1, 0};
    const epi_args bgb = {CUBLASLT_EPILOGUE_BGRADB, bias, NULL, -1, -1, -1, -1, -1, 0, NULL};
    const epi_args bga = {CUBLASLT_EPILOGUE_BGRADA, bias, NULL, -1, -1, -1, -1, -1, 0, NULL};
    check(lt_gemm(CUBLAS_COMPUTE_32F, 0, 1, a, A, bt, B, d, D, d, D, 1, 0, 0, &bgb) == OK,
          "BGRADB with B transposed (the weight gradient's form): accepted");
    check(run(bgb) == UNSUPPORTED, "BGRADB with B not transposed: NOT_SUPPORTED");
    check(lt_gemm(CUBLAS_COMPUTE_32F, 0, 1, a, A, bt, B, d, D, d, D, 1, 0, 0, &bga) == OK,
          "BGRADA with A not transposed: accepted");
    check(lt_gemm(CUBLAS_COMPUTE_32F, 1, 0, at, A, b, B, d, D, d, D, 1, 0, 0, &bga) == UNSUPPORTED,
          "BGRADA with A transposed: NOT_SUPPORTED");
    const epi_args bgb16 = {CUBLASLT_EPILOGUE_BGRADB, bias, NULL, -1, -1, -1, CUDA_R_16BF, -1, 0, NULL};
    check(lt_gemm(CUBLAS_COMPUTE_32F, 0, 1, a, A, bt, B, d, D, d, D, 1, 0, 0, &bgb16) == UNSUPPORTED,
          "BGRADB with a bf16 bias gradient for fp16 D: NOT_SUPPORTED");
    /* Planted faults in the linear layer's two epilogue calls as
     * cuda_dense.cu makes them (C 4 inputs, OC 8 outputs, N 6 rows): the
     * output's leading dimension C where it is OC, and dout's OC-row
     * leading dimension given as C; each refused, not read out of place. */
    const operand wt = {CUDA_R_16F, 4, 8, 4, 1, 0}, x = {CUDA_R_16F, 4, 6, 4, 1, 0};
    const operand out_bad = {CUDA_R_16F, 8, 6, 4, 1, 0}, out = {CUDA_R_16F, 8, 6, 8, 1, 0};
    const epi_args eb = {BIAS, bias, NULL, -1, -1, -1, -1, -1, 0, NULL};
    check(lt_gemm(CUBLAS_COMPUTE_32F, 1, 0, wt, A, x, B, out, D, out, D, 1, 0, 0, &eb) == OK &&
              lt_gemm(CUBLAS_COMPUTE_32F, 1, 0, wt, A, x, B, out_bad, D, out_bad, D, 1, 0, 0, &eb) == INVALID,
          "planted: the forward's BIAS call with the output's ld C (4) for OC (8) rows: INVALID_VALUE");
    const operand xs = {CUDA_R_16F, 4, 6, 4, 1, 0}, dout = {CUDA_R_16F, 8, 6, 8, 1, 0},
                  dout_bad = {CUDA_R_16F, 8, 6, 4, 1, 0}, dw = {CUDA_R_16F, 4, 8, 4, 1, 0};
    check(lt_gemm(CUBLAS_COMPUTE_32F, 0, 1, xs, A, dout, B, dw, D, dw, D, 1, 1, 0, &bgb) == OK &&
              lt_gemm(CUBLAS_COMPUTE_32F, 0, 1, xs, A, dout_bad, B, dw, D, dw, D, 1, 1, 0, &bgb) == INVALID,
          "planted: the weight gradient's BGRADB call with dout's ld C (4) for OC (8) rows: INVALID_VALUE");
    check(run({BIAS, bias, NULL, -1, -1, -1, -1, -1, 4, NULL}) == INVALID,
          "BIAS_POINTER set with 4 bytes: INVALID_VALUE");
    check(run({3, bias, NULL, -1, -1, -1, -1, -1, 0, NULL}) == INVALID, "EPILOGUE 3 (no such epilogue): INVALID_VALUE");
    check(run({CUBLASLT_EPILOGUE_RELU_BIAS, bias, NULL, -1, -1, -1, -1, -1, 0, NULL}) == UNSUPPORTED,
          "RELU_BIAS (not emulated): NOT_SUPPORTED");
    check(run({GAB, bias, aux, 8, -1, -1, -1, -1, 0, NULL}) == OK, "GELU_AUX_BIAS, aux ld 8 for 8 rows: accepted");
    check(run({GAB, bias, aux, 12, -1, -1, -1, -1, 0, NULL}) == INVALID,
          "GELU_AUX_BIAS, aux ld 12 (not a multiple of 8): INVALID_VALUE");
    check(run({GAB, bias, aux, -1, -1, -1, -1, -1, 0, NULL}) == INVALID,
          "GELU_AUX_BIAS, aux ld never set (0): INVALID_VALUE");
    check(run({GAB, bias, aux, 8, -1, -1, -1, -1, 0, NULL}, a10, d10) == INVALID,
          "GELU_AUX_BIAS, aux ld 8 for 10 rows: INVALID_VALUE");
    check(run({GAB, bias, aux, 16, -1, -1, -1, -1, 0, NULL}, a10, d10) == OK,
          "GELU_AUX_BIAS, aux ld 16 for 10 rows: accepted");
    check(run({DG, NULL, NULL, 8, -1, -1, -1, -1, 0, NULL}) == INVALID, "DGELU without an aux pointer: INVALID_VALUE");
    check(run({DG, NULL, aux, 8, -1, -1, -1, CUDA_R_32F, 0, NULL}) == INVALID,
          "DGELU with an fp32 aux type for fp16 D: INVALID_VALUE");
    check(run({DG, NULL, aux, 8, -1, 52, -1, -1, 0, NULL}, a2, d2) == INVALID,
          "DGELU batched, aux batch stride 52 (not a multiple of 8): INVALID_VALUE");
    check(run({DG, NULL, aux, 8, -1, 48, -1, -1, 0, NULL}, a2, d2) == OK, "DGELU batched, aux batch stride 48: accepted");
    /* alignment: the bias's own element, and what the heuristic assumed */
    void *odd = (char *)bias + 1;
    check(run({BIAS, odd, NULL, -1, -1, -1, -1, -1, 0, NULL}) == INVALID,
          "BIAS with a bias 1 byte past (not aligned to its fp16): INVALID_VALUE");
    check(run({BIAS, bias + 1, NULL, -1, -1, -1, -1, -1, 0, NULL}) == OK,
          "BIAS with a bias 2 bytes past, at the heuristic and the matmul: accepted");
    check(run({BIAS, bias, NULL, -1, -1, -1, -1, -1, 0, bias + 1}) == INVALID,
          "BIAS 16-byte aligned at the heuristic, 2 bytes past at the matmul: INVALID_VALUE");
    check(run({GAB, bias, aux + 1, 8, -1, -1, -1, -1, 0, NULL}) == OK &&
              run({DG, NULL, aux + 4, 8, -1, -1, -1, -1, 0, NULL}) == OK,
          "aux 2 and 8 bytes past, the same at the heuristic and the matmul: accepted");
    int st = child_bgrad_short();
    check(st == 70, "BGRADB into a bias gradient one element short: stops the run (exit %d)", st);
    cudaFree(A);
    cudaFree(B);
    cudaFree(D);
    cudaFree(bias);
    cudaFree(aux);
}

/* A matmul in a child process: its exit status (70: cudaemu stopped it). */
static int child_matmul(int short_a, int host_a)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        const operand a = {CUDA_R_32F, 8, 8, 8, 2, 64}, d = a;
        std::vector<float> h(a.elems(), 1.0f);
        float *A = emu_upload(std::vector<float>(a.elems() - (short_a ? 1 : 0), 1.0f));
        float *B = emu_upload(h), *D = emu_upload(h);
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
        keys[i] = (int32_t)(emu_frand(&rng) * 6); /* -5 .. 5, many equal */
        vals[i] = i;
    }
    keys[3] = INT_MIN;
    keys[4] = INT_MAX;
    keys[5] = -1;
    int32_t *kin = emu_upload(keys), *vin = emu_upload(vals), *kout, *vout;
    cudaMalloc((void **)&kout, N * 4);
    cudaMalloc((void **)&vout, N * 4);
    size_t need = 0;
    cudaError_t e = cub::DeviceRadixSort::SortPairs(NULL, need, (const int32_t *)kin, kout, (const int32_t *)vin,
                                                    vout, N, 0, 32, (cudaStream_t)0);
    std::vector<int32_t> untouched = emu_download(kout, N);
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
    untouched = emu_download(kout, N);
    check(e == cudaErrorInvalidValue && untouched[0] == -1, "%s with %zu bytes of %zu: cudaErrorInvalidValue", who,
          small, need);

    /* a stable sort of signed keys, as bertc sorts word ids */
    size_t tb = need;
    e = cub::DeviceRadixSort::SortPairs(temp, tb, (const int32_t *)kin, kout, (const int32_t *)vin, vout, N, 0, 32);
    std::vector<int> order(N);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys[a] < keys[b]; });
    std::vector<int32_t> ko = emu_download(kout, N), vo = emu_download(vout, N);
    bool same = true;
    for (int i = 0; i < N; i++) same = same && ko[i] == keys[order[i]] && vo[i] == order[i];
    check(e == cudaSuccess && same && ko[0] == INT_MIN && ko[N - 1] == INT_MAX,
          "%s of %d signed keys (INT_MIN .. INT_MAX, many equal): stable, negatives first", who, N);
    std::vector<unsigned char> t = emu_download((unsigned char *)temp, need);
    check(std::all_of(t.begin(), t.end(), [](unsigned char c) { return c == 0xFF; }),
          "%s leaves its temporary storage 0xFF", who);

    /* bits [0, 4): by the low digit only, stably */
    e = cub::DeviceRadixSort::SortPairs(temp, tb, (const int32_t *)kin, kout, (const int32_t *)vin, vout, N, 0, 4);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return (keys[a] & 15) < (keys[b] & 15); });
    ko = emu_download(kout, N);
    vo = emu_download(vout, N);
    same = true;
    for (int i = 0; i < N; i++) same = same && ko[i] == keys[order[i]] && vo[i] == order[i];
    check(e == cudaSuccess && same, "%s by bits [0, 4): stable by the low digit", who);

    size_t big = need;
    e = cub::DeviceRadixSort::SortPairs(temp, big, (const int32_t *)kin, kout, (const int32_t *)vin, vout, N, 0, 33);
    check(e == cudaErrorInvalidValue, "%s with end_bit 33 of 32: cudaErrorInvalidValue", who);

    /* float keys in IEEE order, with double values */
    std::vector<float> fk = {2.0f, -0.0f, -INFINITY, 1.0f, 0.0f, -3.5f, INFINITY, -0.0f};
    std::vector<double> fv = {0, 1, 2, 3, 4, 5, 6, 7};
    float *fkin = emu_upload(fk), *fkout;
    double *fvin = emu_upload(fv), *fvout;
    cudaMalloc((void **)&fkout, fk.size() * 4);
    cudaMalloc((void **)&fvout, fv.size() * 8);
    size_t fneed = 0;
    cub::DeviceRadixSort::SortPairs(NULL, fneed, (const float *)fkin, fkout, (const double *)fvin, fvout, 8);
    void *ftemp;
    cudaMalloc(&ftemp, fneed);
    e = cub::DeviceRadixSort::SortPairs(ftemp, fneed, (const float *)fkin, fkout, (const double *)fvin, fvout, 8);
    std::vector<double> fo = emu_download(fvout, 8), want = {2, 5, 1, 7, 4, 3, 0, 6};
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
    test_epilogue_faults(); /* children: before any threads start */
    test_tf32_rounding();
    test_products();
    test_refusals();
    test_output_types();
    test_epilogues();
    test_gelu_forms();
    test_epilogue_refusals();
    test_memory_checks();
    test_sort();
    check(cublasLtDestroy(lt) == CUBLAS_STATUS_SUCCESS, "cublasLtDestroy");
    return check_summary();
}
