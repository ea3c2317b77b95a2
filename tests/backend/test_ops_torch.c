/* CPU backend ops against PyTorch: the tensors in tests/ref/ops (made by
 * tools/make_ops_reference.py, which runs each op as transformers and
 * torch.optim.AdamW do, with bertc's Philox dropout masks) are fed to the
 * ops and every output and gradient is compared, within 1e-5 relative (and
 * 1e-6 of the tensor's largest value, absolute). Each line also says how
 * many elements are bit-for-bit equal to torch's; AdamW must be all of them.
 * Regenerate with: python3 tools/make_ops_reference.py */
#include "backend/backend.h"
#include "core/err.h"
#include "core/fileio.h"
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char name[64];
    int is_int;
    size_t count, offset;
} ref_entry;

static struct {
    ref_entry e[256];
    int n;
    char pname[64][64];
    double pval[64];
    int np;
    unsigned char *bin;
    size_t bin_size;
} ref;

static int ref_load(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/ops.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char a[64], b[64];
        double v;
        if (sscanf(line, "param %63s %lf", a, &v) == 2) {
            if (ref.np < 64) {
                snprintf(ref.pname[ref.np], sizeof ref.pname[0], "%s", a);
                ref.pval[ref.np++] = v;
            }
            continue;
        }
        unsigned long long cnt, off;
        if (sscanf(line, "%63s %63s %llu %llu", a, b, &cnt, &off) != 4 || ref.n >= 256) {
            fprintf(stderr, "%s: bad line: %s", path, line);
            fclose(f);
            return -1;
        }
        ref_entry *e = &ref.e[ref.n++];
        snprintf(e->name, sizeof e->name, "%s", a);
        e->is_int = strcmp(b, "i32") == 0;
        e->count = cnt;
        e->offset = off;
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/ops.bin", dir);
    size_t size;
    if (file_read_all(path, (char **)&ref.bin, &size) != 0) {
        fprintf(stderr, "%s\n", err_msg());
        return -1;
    }
    ref.bin_size = size;
    for (int i = 0; i < ref.n; i++)
        if (ref.e[i].count > size / 4 || ref.e[i].offset > size - ref.e[i].count * 4) {
            fprintf(stderr, "%s: tensor %s lies outside the file\n", path, ref.e[i].name);
            return -1;
        }
    return 0;
}

static double param(const char *name)
{
    for (int i = 0; i < ref.np; i++)
        if (strcmp(ref.pname[i], name) == 0) return ref.pval[i];
    fprintf(stderr, "reference has no param %s\n", name);
    exit(1);
}

/* A copy of a tensor (the file's bytes need not be aligned); count checked. */
static void *tensor(const char *name, size_t want_count)
{
    for (int i = 0; i < ref.n; i++)
        if (strcmp(ref.e[i].name, name) == 0) {
            if (ref.e[i].count != want_count) {
                fprintf(stderr, "reference tensor %s has %zu elements, want %zu\n", name, ref.e[i].count, want_count);
                exit(1);
            }
            void *p = malloc(want_count * 4 + 4);
            memcpy(p, ref.bin + ref.e[i].offset, want_count * 4);
            return p;
        }
    fprintf(stderr, "reference has no tensor %s\n", name);
    exit(1);
}

/* Returns how many elements are bit-for-bit equal. */
static size_t compare(const char *what, const float *got, const char *name, size_t n)
{
    float *want = tensor(name, n);
    double mx = 0;
    size_t exact = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(want[i]) > mx) mx = fabs(want[i]);
        exact += memcmp(&got[i], &want[i], 4) == 0;
    }
    char label[128];
    snprintf(label, sizeof label, "%s vs torch %s (%zu/%zu exact)", what, name, exact, n);
    tu_close(label, got, want, n, 1e-5, 1e-6 * mx);
    free(want);
    return exact;
}

static backend be;

/* The reference's sizes, and the output and gradient buffers every check
 * writes into (sized for the largest op). */
typedef struct {
    int B, T, NH, HS, C, I, V, P, TV, N, QB;
    float *out, *g1, *g2, *g3;
} ops;

static void check_embedding(const ops *z)
{
    const backend_i *o = be.i;
    void *c = be.ctx;
    int N = z->N, T = z->T, C = z->C, V = z->V, P = z->P, TV = z->TV;
    float *out = z->out, *g1 = z->g1, *g2 = z->g2, *g3 = z->g3;
    int32_t *ids = tensor("emb.ids", N), *types = tensor("emb.types", N);
    float *wte = tensor("emb.wte", (size_t)V * C), *wpe = tensor("emb.wpe", (size_t)P * C),
          *wtt = tensor("emb.wtt", (size_t)TV * C), *dout = tensor("emb.dout", (size_t)N * C);
    o->embedding_forward(c, out, ids, types, NULL, wte, wpe, wtt, N, T, C);
    compare("embedding forward", out, "emb.out", (size_t)N * C);
    o->embedding_backward(c, g1, g2, g3, dout, ids, types, NULL, N, T, C);
    compare("embedding backward", g1, "emb.dwte", (size_t)V * C);
    compare("embedding backward", g2, "emb.dwpe", (size_t)P * C);
    compare("embedding backward", g3, "emb.dwtt", (size_t)TV * C);
    free(ids), free(types), free(wte), free(wpe), free(wtt), free(dout);
}

static void check_layernorm(const ops *z)
{
    const backend_i *o = be.i;
    void *c = be.ctx;
    int N = z->N, C = z->C;
    float *out = z->out, *g1 = z->g1, *g2 = z->g2, *g3 = z->g3;
    float *x = tensor("ln.inp", (size_t)N * C), *w = tensor("ln.w", C), *b = tensor("ln.b", C),
          *d = tensor("ln.dout", (size_t)N * C);
    float mean[4096], rstd[4096];
    o->layernorm_forward(c, out, mean, rstd, x, w, b, N, C, (float)param("ln_eps"));
    compare("layernorm forward", out, "ln.out", (size_t)N * C);
    compare("layernorm forward", mean, "ln.mean", N);
    compare("layernorm forward", rstd, "ln.rstd", N);
    memset(g1, 0, (size_t)N * C * 4), memset(g2, 0, C * 4), memset(g3, 0, C * 4);
    o->layernorm_backward(c, g1, g2, g3, d, x, w, mean, rstd, N, C);
    compare("layernorm backward", g1, "ln.dinp", (size_t)N * C);
    compare("layernorm backward", g2, "ln.dw", C);
    compare("layernorm backward", g3, "ln.db", C);
    free(x), free(w), free(b), free(d);
}

/* nn.Linear, with and without bias; GELU. */
static void check_matmul_gelu(const ops *z)
{
    const backend_i *o = be.i;
    void *c = be.ctx;
    int N = z->N, C = z->C, I = z->I;
    float *out = z->out, *g1 = z->g1, *g2 = z->g2, *g3 = z->g3;
    for (int k = 0; k < 2; k++) {
        int cin = k ? I : C, cout = k ? C : I;
        char nm[64];
#define REF(s) (snprintf(nm, sizeof nm, "mm%d.%s", k + 1, s), nm)
        float *x = tensor(REF("inp"), (size_t)N * cin), *w = tensor(REF("w"), (size_t)cout * cin);
        float *b = k ? NULL : tensor(REF("b"), cout), *d = tensor(REF("dout"), (size_t)N * cout);
        o->matmul_forward(c, out, x, w, b, N, cin, cout);
        compare("matmul forward", out, REF("out"), (size_t)N * cout);
        memset(g1, 0, (size_t)N * cin * 4), memset(g2, 0, (size_t)cout * cin * 4), memset(g3, 0, cout * 4);
        o->matmul_backward(c, g1, g2, b ? g3 : NULL, d, x, w, N, cin, cout);
        compare("matmul backward", g1, REF("dinp"), (size_t)N * cin);
        compare("matmul backward", g2, REF("dw"), (size_t)cout * cin);
        if (b) compare("matmul backward", g3, REF("db"), cout);
#undef REF
        free(x), free(w), free(b), free(d);
    }

    float *x = tensor("gelu.inp", (size_t)N * I), *d = tensor("gelu.dout", (size_t)N * I);
    o->gelu_forward(c, out, x, (size_t)N * I);
    compare("gelu forward", out, "gelu.out", (size_t)N * I);
    memset(g1, 0, (size_t)N * I * 4);
    o->gelu_backward(c, g1, x, d, (size_t)N * I);
    compare("gelu backward", g1, "gelu.dinp", (size_t)N * I);
    free(x), free(d);
}

/* attention, without and with dropout on the probabilities */
static void check_attention(const ops *z)
{
    const backend_i *o = be.i;
    void *c = be.ctx;
    int B = z->B, T = z->T, NH = z->NH, HS = z->HS, N = z->N, C = z->C;
    float *out = z->out, *g1 = z->g1, *g2 = z->g2, *g3 = z->g3;
    int32_t *mask = tensor("att.mask", N);
    float *q = tensor("att.q", (size_t)N * C), *k = tensor("att.k", (size_t)N * C), *v = tensor("att.v", (size_t)N * C),
          *d = tensor("att.dout", (size_t)N * C);
    size_t np = (size_t)B * NH * T * T;
    float *probs = malloc(np * 4), *scratch = malloc(np * 4);
    philox_stream rng = {(uint64_t)param("att_seed"), (uint32_t)param("att_step"), (uint32_t)param("att_stream")};
    backend_windows w = backend_windows_padded(B, T, mask);
    for (int pass = 0; pass < 2; pass++) {
        float p = pass ? (float)param("p_attn") : 0.0f;
        char nm[64], what[64];
        snprintf(what, sizeof what, "attention p=%.1f", p);
#define REF(s) (snprintf(nm, sizeof nm, "att%d.%s", pass, s), nm)
        o->attention_forward(c, out, probs, q, k, v, &w, NH, HS, p, rng);
        compare(what, out, REF("out"), (size_t)N * C);
        compare(what, probs, REF("probs"), np);
        memset(g1, 0, (size_t)N * C * 4), memset(g2, 0, (size_t)N * C * 4), memset(g3, 0, (size_t)N * C * 4);
        o->attention_backward(c, g1, g2, g3, scratch, d, q, k, v, probs, &w, NH, HS, p, rng);
        compare(what, g1, REF("dq"), (size_t)N * C);
        compare(what, g2, REF("dk"), (size_t)N * C);
        compare(what, g3, REF("dv"), (size_t)N * C);
#undef REF
    }
    free(mask), free(q), free(k), free(v), free(d), free(probs), free(scratch);
}

/* hidden dropout; the QA loss */
static void check_dropout_qa(const ops *z)
{
    const backend_i *o = be.i;
    void *c = be.ctx;
    int B = z->B, T = z->T, N = z->N, C = z->C, QB = z->QB;
    float *out = z->out, *g1 = z->g1;
    size_t n = (size_t)N * C;
    float *x = tensor("drop.inp", n), *d = tensor("drop.dout", n);
    philox_stream rng = {(uint64_t)param("drop_seed"), (uint32_t)param("drop_step"), (uint32_t)param("drop_stream")};
    backend_windows w = backend_windows_padded(B, T, NULL);
    float p_hidden = (float)param("p_hidden");
    o->dropout_forward(c, out, x, &w, C, p_hidden, rng);
    compare("dropout forward", out, "drop.out", n);
    memset(g1, 0, n * 4);
    o->dropout_backward(c, g1, d, &w, C, p_hidden, rng);
    compare("dropout backward", g1, "drop.dinp", n);
    free(x), free(d);

    float *logits = tensor("qa.logits", (size_t)QB * T * 2);
    int32_t *st = tensor("qa.start", QB), *en = tensor("qa.end", QB);
    float loss;
    backend_windows wq = backend_windows_padded(QB, T, NULL);
    o->qa_loss(c, &loss, g1, logits, st, en, &wq, 1.0f);
    compare("qa_loss", &loss, "qa.loss", 1);
    compare("qa_loss", g1, "qa.dlogits", (size_t)QB * T * 2);
    free(logits), free(st), free(en);
}

/* AdamW, three steps from zero moments */
static void check_adamw(void)
{
    size_t n = 0;
    for (int i = 0; i < ref.n; i++)
        if (strcmp(ref.e[i].name, "adamw.p0") == 0) n = ref.e[i].count;
    float *p = tensor("adamw.p0", n), *m = calloc(n, 4), *v = calloc(n, 4);
    float lr = (float)param("adamw_lr"), wd = (float)param("adamw_wd");
    for (int t = 1; t <= 3; t++) {
        char nm[32], what[32];
        snprintf(nm, sizeof nm, "adamw.g%d", t);
        float *g = tensor(nm, n);
        be.i->adamw(be.ctx, p, g, m, v, n, lr, 0.9f, 0.999f, 1e-8f, wd, t, 1.0f);
        snprintf(what, sizeof what, "adamw step %d", t);
        /* every rounding follows torch's kernels (fma where they fuse),
         * so AdamW is required to be bit-for-bit torch's */
        snprintf(nm, sizeof nm, "adamw.p%d", t);
        CHECK(compare(what, p, nm, n) == n, "adamw step %d: p not bit-exact", t);
        snprintf(nm, sizeof nm, "adamw.m%d", t);
        CHECK(compare(what, m, nm, n) == n, "adamw step %d: m not bit-exact", t);
        snprintf(nm, sizeof nm, "adamw.v%d", t);
        CHECK(compare(what, v, nm, n) == n, "adamw step %d: v not bit-exact", t);
        free(g);
    }
    free(p), free(m), free(v);
}

int main(void)
{
    if (ref_load("tests/ref/ops") != 0) return 1;
    if (backend_cpu_create(&be, 2) != 0) {
        fprintf(stderr, "%s\n", err_msg());
        return 1;
    }
    ops z = {.B = (int)param("B"), .T = (int)param("T"), .NH = (int)param("NH"), .HS = (int)param("HS"),
             .V = (int)param("V"), .P = (int)param("P"), .TV = (int)param("TV"), .QB = (int)param("QB")};
    z.C = z.NH * z.HS;
    z.I = 4 * z.C;
    z.N = z.B * z.T;
    z.out = calloc((size_t)z.N * z.I * 4, sizeof *z.out);
    z.g1 = calloc((size_t)z.V * z.I * 2, sizeof *z.g1);
    z.g2 = calloc((size_t)z.P * z.I * 2, sizeof *z.g2);
    z.g3 = calloc((size_t)z.N * z.I * 2, sizeof *z.g3);
    check_embedding(&z);
    check_layernorm(&z);
    check_matmul_gelu(&z);
    check_attention(&z);
    check_dropout_qa(&z);
    check_adamw();
    free(z.out), free(z.g1), free(z.g2), free(z.g3);
    free(ref.bin);
    backend_free(&be);
    return tu_done();
}
