/* squad_load: the real data sets load with the right counts; every answer
 * points at its text through cp_byte; bad files are rejected with messages
 * that name the place; wrong answer_starts are relocated or counted. */
#include "testutil.h"
#include "core/err.h"
#include "data/squad.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int find_ex(const squad_data *d, const char *id)
{
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->ex[i].id, id)) return i;
    return -1;
}

/* Every answer found in the file must be at its code point start, and the
 * code point index must be consistent with the bytes. */
static void check_consistent(const char *name, const squad_data *d)
{
    int bad_idx = 0, bad_ans = 0, first_bad = -1;
    for (int c = 0; c < d->ncontexts; c++) {
        const squad_context *x = &d->contexts[c];
        if (x->cp_byte[0] != 0 || (size_t)x->cp_byte[x->ncp] != x->nbytes) bad_idx++;
        for (int k = 0; k < x->ncp; k++)
            if (x->cp_byte[k] >= x->cp_byte[k + 1] || ((unsigned char)x->text[x->cp_byte[k]] & 0xC0) == 0x80) {
                bad_idx++;
                break;
            }
    }
    for (int i = 0; i < d->n; i++) {
        const squad_example *e = &d->ex[i];
        const squad_context *x = &d->contexts[e->context];
        for (int k = 0; k < e->n_answers; k++) {
            int s = e->answer_start[k];
            if (s < 0) continue;
            size_t tl = strlen(e->answer_text[k]);
            if (s > x->ncp || x->cp_byte[s] + tl > x->nbytes || memcmp(x->text + x->cp_byte[s], e->answer_text[k], tl)) {
                if (first_bad < 0) first_bad = i;
                bad_ans++;
            }
        }
    }
    printf("%s: %d questions, %d contexts, relocated %d, unfound %d, bad index %d, misplaced answers %d\n", name, d->n,
           d->ncontexts, d->n_relocated, d->n_unfound, bad_idx, bad_ans);
    CHECK(bad_idx == 0, "%s: %d contexts with a wrong cp_byte", name, bad_idx);
    CHECK(bad_ans == 0, "%s: %d answers not at their start (first: question %s)", name, bad_ans,
          first_bad >= 0 ? d->ex[first_bad].id : "-");
}

/* Loads the data set rel (what names it when it fails to load, short in the
 * counts) and checks its numbers of questions and contexts; 0 when loaded. */
static int load_counted(const char *rel, const char *what, const char *short_name, int n, int ncontexts, squad_data *d)
{
    int rc = squad_load(tu_data(rel), d);
    CHECK(rc == 0, "%s: %s", what, err_msg());
    if (rc) return rc;
    CHECK(d->n == n, "%s questions %d", short_name, d->n);
    CHECK(d->ncontexts == ncontexts, "%s contexts %d", short_name, d->ncontexts);
    return 0;
}

static void test_real(void)
{
    squad_data d;
    if (load_counted("squad-v1.1/dev-v1.1.json", "squad dev", "squad dev", 10570, 2067, &d) == 0) {
        CHECK(d.n_relocated == 0 && d.n_unfound == 0, "squad dev relocated %d unfound %d", d.n_relocated, d.n_unfound);
        CHECK(!strcmp(d.version, "1.1"), "version '%s'", d.version);
        CHECK(!strcmp(d.ex[0].id, "56be4db0acb8001400a502ec") && d.ex[0].answer_start[0] == 177 &&
                  !strcmp(d.ex[0].answer_text[0], "Denver Broncos") && d.ex[0].train_answer == 0,
              "first question %s start %d", d.ex[0].id, d.ex[0].answer_start[0]);
        CHECK(d.contexts[0].ncp == 775, "first context %d code points", d.contexts[0].ncp);
        const squad_example *e = &d.ex[d.n - 1];
        CHECK(!strcmp(e->id, "5737aafd1c456719005744ff") && e->answer_start[0] == 665 &&
                  !strcmp(e->answer_text[0], "sthène"),
              "last question %s start %d", e->id, e->answer_start[0]);
        check_consistent("squad dev", &d);
        squad_free(&d);
    }
    if (load_counted("cmrc2018/cmrc2018_trial.json", "cmrc trial", "cmrc", 1002, 256, &d) == 0) {
        /* The five known bad offsets are all one code point too far. */
        CHECK(d.n_relocated == 5 && d.n_unfound == 0, "cmrc relocated %d unfound %d", d.n_relocated, d.n_unfound);
        int i = find_ex(&d, "TRIAL_210_QUERY_0");
        CHECK(i >= 0 && d.ex[i].answer_start[0] == 13 && d.ex[i].train_answer == 0, "TRIAL_210_QUERY_0 start %d",
              i >= 0 ? d.ex[i].answer_start[0] : -99);
        if (i >= 0) {
            const squad_context *c = &d.contexts[d.ex[i].context];
            CHECK(c->ncp == 394 && c->nbytes == 1147, "TRIAL_210 context %d cp %zu bytes", c->ncp, c->nbytes);
        }
        check_consistent("cmrc trial", &d);
        squad_free(&d);
    }
    if (load_counted("xquad/xquad.zh.json", "xquad zh", "xquad", 1190, 240, &d) == 0) {
        CHECK(d.n_relocated == 0 && d.n_unfound == 0, "xquad relocated %d unfound %d", d.n_relocated, d.n_unfound);
        CHECK(!strcmp(d.ex[0].id, "56beb4343aeaaa14008c925b") && d.ex[0].answer_start[0] == 10, "xquad first %s",
              d.ex[0].id);
        check_consistent("xquad zh", &d);
        squad_free(&d);
    }
}

/* Loads text that must fail: ERR_INPUT with the file's path and want1 to
 * want3 (those not NULL) in the message, and the output cleared. */
static void expect_error(const char *name, const char *text, const char *want1, const char *want2, const char *want3)
{
    const char *path = tu_write_tmp(name, text);
    squad_data d;
    err_clear();
    int rc = squad_load(path, &d);
    tu_expect_input_error(name, rc, path, want1, want2, want3, NULL);
    CHECK(d.n == 0 && d.ex == NULL, "%s: output not cleared", name);
    if (rc == 0) squad_free(&d);
}

#define HEAD "{\"version\": \"1.1\", \"data\": [{\"title\": \"t\", \"paragraphs\": [{\"context\": \"The cat sat on the mat.\", \"qas\": ["
#define TAIL "]}]}]}"

static void test_bad(void)
{
    expect_error("syntax.json", "{\"data\": [\n  {\"paragraphs\": [}\n]}", "syntax.json:2:", NULL, NULL);
    expect_error("trunc.json", HEAD "{\"id\": \"q1\", \"question\": \"Who?\", \"answers\": [", "trunc.json:1:", NULL, NULL);
    expect_error("empty.json", "", "empty.json:", NULL, NULL);
    expect_error("toplist.json", "[1, 2]", "top level", "expected an object", NULL);
    expect_error("nodata.json", "{\"version\": \"1.1\"}", "\"data\"", "missing", NULL);
    expect_error("dataobj.json", "{\"data\": {}}", "\"data\"", "expected an array", NULL);
    expect_error("nopars.json", "{\"data\": [{\"title\": \"x\"}]}", "data[0]", "\"paragraphs\"", "missing");
    expect_error("ctxnum.json", "{\"data\": [{\"paragraphs\": [{\"context\": 5, \"qas\": []}]}]}", "data[0].paragraphs[0]",
                 "\"context\"", "expected a string, got integer");
    expect_error("noid.json", HEAD "{\"id\": \"q1\", \"question\": \"Who?\", \"answers\": []}, {\"question\": \"Where?\", \"answers\": []}" TAIL,
                 "data[0].paragraphs[0].qas[1]", "\"id\"", "missing");
    expect_error("noquestion.json", HEAD "{\"id\": \"q7\", \"answers\": []}" TAIL, "question \"q7\"", "\"question\"", "missing");
    expect_error("qnum.json", HEAD "{\"id\": \"q7\", \"question\": 3, \"answers\": []}" TAIL, "question \"q7\"", "\"question\"",
                 "expected a string, got integer");
    expect_error("idnum.json", HEAD "{\"id\": 12, \"question\": \"Who?\", \"answers\": []}" TAIL, "qas[0]", "\"id\"",
                 "expected a string");
    expect_error("noanswers.json", HEAD "{\"id\": \"q7\", \"question\": \"Who?\"}" TAIL, "question \"q7\"", "\"answers\"",
                 "missing");
    expect_error("startstr.json", HEAD "{\"id\": \"q8\", \"question\": \"Who?\", \"answers\": [{\"text\": \"cat\", \"answer_start\": \"4\"}]}" TAIL,
                 "question \"q8\"", "answers[0].answer_start", "expected an integer, got string");
    expect_error("startreal.json", HEAD "{\"id\": \"q8\", \"question\": \"Who?\", \"answers\": [{\"text\": \"cat\", \"answer_start\": 4.5}]}" TAIL,
                 "question \"q8\"", "answers[0].answer_start", "expected an integer, got number");
    expect_error("notext.json", HEAD "{\"id\": \"q9\", \"question\": \"Who?\", \"answers\": [{\"text\": \"cat\", \"answer_start\": 4}, {\"answer_start\": 4}]}" TAIL,
                 "question \"q9\"", "answers[1].text", "missing");
    expect_error("ansstr.json", HEAD "{\"id\": \"q9\", \"question\": \"Who?\", \"answers\": [\"cat\"]}" TAIL,
                 "question \"q9\"", "answers[0]", "expected an object");
    expect_error("impossible.json", HEAD "{\"id\": \"q9\", \"question\": \"Who?\", \"answers\": [], \"is_impossible\": 1}" TAIL,
                 "question \"q9\"", "is_impossible", "expected a boolean");
    expect_error("dupid.json", HEAD "{\"id\": \"q1\", \"question\": \"A?\", \"answers\": []}, {\"id\": \"q1\", \"question\": \"B?\", \"answers\": []}" TAIL,
                 "question \"q1\"", "duplicate", NULL);
    squad_data d;
    int rc = squad_load("/nonexistent/dir/x.json", &d);
    CHECK(rc != 0 && strstr(err_msg(), "/nonexistent/dir/x.json"), "missing file rc %d: %s", rc, err_msg());
}

static void test_relocate(void)
{
    /* Context in code points: "naïve café: the café, and a café." ; "café" occurs at 6, 16 and 28. */
    const char *text =
        "{\"version\": \"v2.0\", \"data\": [{\"paragraphs\": [{\"context\": \"na\\u00efve caf\\u00e9: the caf\\u00e9, and a caf\\u00e9.\", \"qas\": ["
        "{\"id\": \"exact\", \"question\": \"  q\", \"answers\": [{\"text\": \"caf\\u00e9\", \"answer_start\": 16}]},"
        "{\"id\": \"off3\", \"question\": \"q\", \"answers\": [{\"text\": \"caf\\u00e9\", \"answer_start\": 19}]},"
        "{\"id\": \"tie\", \"question\": \"q\", \"answers\": [{\"text\": \"caf\\u00e9\", \"answer_start\": 11}]},"
        "{\"id\": \"far\", \"question\": \"q\", \"answers\": [{\"text\": \"caf\\u00e9\", \"answer_start\": 400}]},"
        "{\"id\": \"neg\", \"question\": \"q\", \"answers\": [{\"text\": \"caf\\u00e9.\", \"answer_start\": -1}]},"
        "{\"id\": \"absent\", \"question\": \"q\", \"answers\": [{\"text\": \"tea\", \"answer_start\": 3}, {\"text\": \"na\\u00efve\", \"answer_start\": 0}]},"
        "{\"id\": \"empty\", \"question\": \"q\", \"answers\": [{\"text\": \"\", \"answer_start\": 0}]},"
        "{\"id\": \"v2\", \"question\": \"q\", \"answers\": [], \"is_impossible\": true}"
        "]}]}]}";
    const char *path = tu_write_tmp("relocate.json", text);
    squad_data d;
    int rc = squad_load(path, &d);
    CHECK(rc == 0, "relocate.json: %s", err_msg());
    if (rc) return;
    static const struct { const char *id; int start, train; } want[] = {
        {"exact", 16, 0}, {"off3", 16, 0}, {"tie", 6, 0}, {"far", 28, 0}, {"neg", 28, 0},
        {"absent", -1, 1}, {"empty", -1, -1}, {"v2", -1, -1},
    };
    CHECK(d.n == 8 && d.ncontexts == 1, "%d questions %d contexts", d.n, d.ncontexts);
    CHECK(d.contexts[0].ncp == 33 && d.contexts[0].nbytes == 37, "context %d cp %zu bytes", d.contexts[0].ncp,
          d.contexts[0].nbytes);
    CHECK(!strcmp(d.version, "v2.0"), "version %s", d.version);
    for (int i = 0; i < 8 && i < d.n; i++) {
        const squad_example *e = &d.ex[i];
        int s = e->n_answers ? e->answer_start[0] : -1;
        printf("  %-7s start %3d train_answer %d\n", e->id, s, e->train_answer);
        CHECK(!strcmp(e->id, want[i].id) && s == want[i].start && e->train_answer == want[i].train,
              "%s: start %d (want %d) train %d (want %d)", e->id, s, want[i].start, e->train_answer, want[i].train);
    }
    CHECK(d.ex[5].answer_start[1] == 0, "second answer of 'absent' at %d", d.ex[5].answer_start[1]);
    CHECK(d.ex[7].is_impossible == 1 && d.ex[7].n_answers == 0, "v2 impossible %d answers %d", d.ex[7].is_impossible,
          d.ex[7].n_answers);
    CHECK(!strcmp(d.ex[0].question, "  q"), "question kept as in the file: '%s'", d.ex[0].question);
    /* off3, tie, far, neg were moved; absent[0] and empty are unfound. */
    CHECK(d.n_relocated == 4 && d.n_unfound == 2, "relocated %d unfound %d", d.n_relocated, d.n_unfound);
    squad_free(&d);
}

/* Up to 3 random edits: a byte replaced, deleted, or made a JSON
 * delimiter. */
static void squad_mutate(char *buf, size_t *len, int it, uint64_t *state)
{
    int edits = 1 + it % 3;
    for (int e = 0; e < edits; e++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        size_t at = (size_t)(*state >> 33) % *len;
        unsigned char byte = (unsigned char)(*state >> 20);
        int kind = (int)((*state >> 12) % 3);
        if (kind == 0) buf[at] = (char)byte;                                    /* replace */
        else if (kind == 1) memmove(buf + at, buf + at + 1, (*len)-- - at - 1); /* delete */
        else buf[at] = "{}[]\",:0-9"[byte % 11];                               /* structural */
    }
    /* the file is the text: up to a NUL byte a replacement may have made */
    const char *nul = memchr(buf, 0, *len);
    if (nul) *len = (size_t)(nul - buf);
}

/* The answers of d whose text is not at their offset. */
static int misplaced_answers(const squad_data *d)
{
    int bad = 0;
    for (int i = 0; i < d->n; i++) {
        const squad_example *x = &d->ex[i];
        const squad_context *c = &d->contexts[x->context];
        for (int k = 0; k < x->n_answers; k++) {
            int st = x->answer_start[k];
            size_t tl = strlen(x->answer_text[k]);
            bad += st >= 0 && (st > c->ncp || c->cp_byte[st] + tl > c->nbytes ||
                               memcmp(c->text + c->cp_byte[st], x->answer_text[k], tl));
        }
    }
    return bad;
}

/* Loads a mutant; adds its misplaced answers to *bad. */
static int squad_load_check(const char *path, void *bad)
{
    squad_data d;
    int rc = squad_load(path, &d);
    if (rc == 0) {
        *(int *)bad += misplaced_answers(&d);
        squad_free(&d);
    }
    return rc;
}

/* Random byte changes to a small valid file: every result is a clean load
 * (with answers where it says) or ERR_INPUT, never a crash. */
static void test_mutations(void)
{
    const char *base =
        "{\"version\": \"1.1\", \"data\": [{\"title\": \"t\", \"paragraphs\": [{\"context\": \"Caf\u00e9 \u4e2d\u6587 is here, caf\u00e9.\", "
        "\"qas\": [{\"id\": \"q1\", \"question\": \"Where?\", \"answers\": [{\"text\": \"here\", \"answer_start\": 11}, "
        "{\"text\": \"caf\u00e9\", \"answer_start\": 3}]}, {\"id\": \"q2\", \"question\": \"What?\", \"answers\": [], "
        "\"is_impossible\": true}]}]}]}";
    int iters = tu_sanitized() ? 400 : 3000, bad = 0, n[3];
    tu_mutants("mutant.json", base, strlen(base), iters, 12345, squad_mutate, squad_load_check, &bad, n);
    int loaded = n[0], rejected = n[1], other = n[2];
    printf("mutations: %d files, %d loaded, %d rejected (ERR_INPUT), %d other codes, %d misplaced answers\n", iters,
           loaded, rejected, other, bad);
    CHECK(other == 0 && bad == 0, "mutations: %d other return codes, %d misplaced answers", other, bad);
    CHECK(loaded > 0 && rejected > 0, "mutations exercised only one path (%d loaded, %d rejected)", loaded, rejected);
}

int main(void)
{
    test_real();
    test_bad();
    test_relocate();
    test_mutations();
    return tu_done();
}
