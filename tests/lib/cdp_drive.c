/* cdp_drive: types into bertc serve's page (GET /) in headless Chromium the
 * way a person does, and writes what the page then shows as JSON. The test
 * tests/cli/serve_typing.sh compares that with POST /v1/answer.
 *
 * Chromium is driven through the DevTools protocol over
 * --remote-debugging-pipe: it reads commands from its fd 3 and writes replies
 * and events to its fd 4, each one JSON message ended by a NUL byte. The
 * driver opens a tab (Target.createTarget), attaches to it with a flat
 * session (every later command carries "sessionId"), loads the page, clicks
 * the context box and the question box with mouse events at their bounding
 * boxes, types every character as key events (Input.insertText for
 * characters outside ASCII, as an input method would), presses Enter for the
 * first question, and for each further question clears the box with End and
 * Backspace, types it and clicks the Answer button. After each it waits for
 * the answer and reads the answer, the marked text in the context and the
 * n-best rows.
 *
 * It checks on its own that the keys and clicks reached the page as trusted
 * events (counted by listeners it adds before typing), that the boxes hold
 * exactly the typed text, and that the page logged no errors (exceptions,
 * console.error, failed loads); any of these fails the run (exit 1).
 *
 * Every wait has a deadline (poll()), an alarm() bounds the whole run, and
 * Chromium (its whole process group) is killed and reaped on every way out.
 *
 * usage: cdp_drive --browser PATH --url URL --dir DIR --out FILE.json
 *                  --context TEXT --question TEXT [--question TEXT ...]
 *                  [--screenshot FILE.png] [--timeout SECONDS]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_QUESTIONS 8

typedef struct {
    pid_t pid;            /* chromium, leader of its own process group */
    int wfd, rfd;         /* our ends of its fd 3 and fd 4 */
    char *buf;            /* bytes read from fd 4, not yet a whole message */
    size_t len, cap;
    int next_id;
    char session[128];
    json_t *errors;       /* what the page logged as errors (strings) */
    json_t *rounds;       /* what the page showed for each question */
    double deadline;      /* of the whole run, in now_s() time */
    const char *log;      /* chromium's stderr, shown on failure */
    const char *step;     /* the wait under way, for the timeout message */
} cdp;

static volatile pid_t g_browser = -1;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* SIGALRM (the whole run's bound) and SIGTERM/SIGINT (ctest's timeout): kill
 * chromium's group and leave; only async-signal-safe calls. */
static void on_signal(int sig) {
    static const char m_alarm[] = "cdp_drive: FAIL: the run passed its time limit (alarm); killing chromium\n";
    static const char m_term[] = "cdp_drive: stopped by a signal; killing chromium\n";
    if (sig == SIGALRM) {
        ssize_t w = write(2, m_alarm, sizeof m_alarm - 1);
        (void)w;
    } else {
        ssize_t w = write(2, m_term, sizeof m_term - 1);
        (void)w;
    }
    if (g_browser > 0) kill(-g_browser, SIGKILL);
    _exit(1);
}

/* Closing its pipe asks chromium to quit; `grace` seconds later its whole
 * process group is killed. */
static void browser_kill(cdp *c, double grace) {
    if (c->wfd >= 0) close(c->wfd);
    c->wfd = -1;
    if (c->pid <= 0) return;
    int status = 0;
    pid_t r = 0;
    for (int i = 0; i < grace * 50 && (r = waitpid(c->pid, &status, WNOHANG)) == 0; i++) usleep(20000);
    kill(-c->pid, SIGKILL); /* the group: its renderer and helpers too */
    if (r == 0) waitpid(c->pid, &status, 0);
    g_browser = -1;
    c->pid = -1;
}

static void cdp_free(cdp *c) {
    if (c->rfd >= 0) close(c->rfd);
    c->rfd = -1;
    free(c->buf);
    c->buf = NULL;
    json_decref(c->errors);
    c->errors = NULL;
    json_decref(c->rounds);
    c->rounds = NULL;
}

static void show_log(const cdp *c) {
    FILE *f = c->log ? fopen(c->log, "r") : NULL;
    if (!f) return;
    char line[512];
    long n = 0;
    while (fgets(line, sizeof line, f)) n++;
    rewind(f);
    long skip = n > 15 ? n - 15 : 0;
    fprintf(stderr, "cdp_drive: the last %ld lines of chromium's log (%s):\n", n - skip, c->log);
    for (long i = 0; fgets(line, sizeof line, f); i++)
        if (i >= skip) fprintf(stderr, "  %s", line);
    fclose(f);
}

static void fail(cdp *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cdp_drive: FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    browser_kill(c, 0);
    show_log(c);
    cdp_free(c);
    exit(1);
}

static void browser_start(cdp *c, const char *browser, const char *profile) {
    int to_chrome[2], from_chrome[2];
    if (pipe2(to_chrome, O_CLOEXEC) != 0 || pipe2(from_chrome, O_CLOEXEC) != 0) fail(c, "pipe: %s", strerror(errno));
    char udd[4200];
    snprintf(udd, sizeof udd, "--user-data-dir=%s", profile);
    pid_t pid = fork();
    if (pid < 0) fail(c, "fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        /* move the ends above fd 4 first, so that dup2 onto 3 and 4 can
         * neither clobber the other end nor keep O_CLOEXEC */
        int in = fcntl(to_chrome[0], F_DUPFD, 10), out = fcntl(from_chrome[1], F_DUPFD, 10);
        if (in < 0 || out < 0 || dup2(in, 3) != 3 || dup2(out, 4) != 4) _exit(127);
        int logfd = open(c->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int nul = open("/dev/null", O_RDONLY);
        if (logfd >= 0) {
            dup2(logfd, 1);
            dup2(logfd, 2);
        }
        if (nul >= 0) dup2(nul, 0);
        close(in);
        close(out);
        execl(browser, browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
              "--disable-sync", "--mute-audio", "--window-size=1000,900", udd, "--remote-debugging-pipe",
              "about:blank", (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid); /* also here: no race with the child's own call */
    c->pid = pid;
    g_browser = pid;
    close(to_chrome[0]);
    close(from_chrome[1]);
    c->wfd = to_chrome[1];
    c->rfd = from_chrome[0];
    printf("step: started %s (pid %d), DevTools on its fds 3 and 4\n", browser, (int)pid);
}

/* Why chromium is gone, for the message on EOF. */
static const char *browser_exit_text(cdp *c, char *out, size_t n) {
    int status = 0;
    pid_t r = 0;
    for (int i = 0; i < 50 && (r = waitpid(c->pid, &status, WNOHANG)) == 0; i++) usleep(20000);
    if (r == c->pid) {
        kill(-c->pid, SIGKILL);
        c->pid = -1;
        g_browser = -1;
        if (WIFEXITED(status)) snprintf(out, n, "it exited with status %d", WEXITSTATUS(status));
        else if (WIFSIGNALED(status)) snprintf(out, n, "it was killed by signal %d", WTERMSIG(status));
        else snprintf(out, n, "it stopped");
    } else {
        snprintf(out, n, "it is still running");
    }
    return out;
}

static void cdp_send(cdp *c, int id, const char *method, json_t *params, int in_session) {
    json_t *m = json_pack("{s:i, s:s}", "id", id, "method", method);
    json_object_set_new(m, "params", params ? params : json_object());
    if (in_session) json_object_set_new(m, "sessionId", json_string(c->session));
    char *s = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    if (!s) fail(c, "cannot encode %s", method);
    size_t n = strlen(s) + 1; /* with its NUL: the message's end on the pipe */
    for (size_t off = 0; off < n;) {
        ssize_t w = write(c->wfd, s + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            char why[128];
            const char *e = strerror(errno);
            free(s);
            fail(c, "chromium closed the DevTools pipe (%s on fd 3) while sending %s; %s", e, method,
                 browser_exit_text(c, why, sizeof why));
        }
        off += (size_t)w;
    }
    free(s);
}

/* One message from fd 4, waiting at most until `until`; `what` names the
 * wait in the failure messages. */
static json_t *cdp_read(cdp *c, double until, const char *what) {
    for (;;) {
        char *end = c->len ? memchr(c->buf, '\0', c->len) : NULL;
        if (end) {
            size_t n = (size_t)(end - c->buf);
            json_error_t je;
            json_t *m = json_loadb(c->buf, n, 0, &je);
            memmove(c->buf, end + 1, c->len - n - 1);
            c->len -= n + 1;
            if (!m || !json_is_object(m)) fail(c, "chromium sent a message that is not a JSON object (%s) while %s", je.text, what);
            return m;
        }
        double left = until - now_s();
        if (left <= 0) fail(c, "timed out while %s", what);
        struct pollfd p = {.fd = c->rfd, .events = POLLIN};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) fail(c, "poll: %s", strerror(errno));
        if (r == 0) continue;
        if (c->cap - c->len < 65536) {
            c->cap = c->cap ? c->cap * 2 : 262144;
            c->buf = realloc(c->buf, c->cap);
            if (!c->buf) fail(c, "out of memory");
        }
        ssize_t got = read(c->rfd, c->buf + c->len, c->cap - c->len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) fail(c, "reading chromium's pipe: %s", strerror(errno));
        if (got == 0) {
            char why[128];
            fail(c, "chromium closed the DevTools pipe (EOF on fd 4) while %s; %s", what,
                 browser_exit_text(c, why, sizeof why));
        }
        c->len += (size_t)got;
    }
}

/* A Runtime.RemoteObject as text: its string value, else its description
 * (an exception's message and stack), else its value as JSON. */
static void text_of_remote_object(json_t *o, char *out, size_t n) {
    json_t *val = json_object_get(o, "value");
    const char *d = json_string_value(json_object_get(o, "description"));
    const char *type = json_string_value(json_object_get(o, "type"));
    if (json_is_string(val)) snprintf(out, n, "%s", json_string_value(val));
    else if (d) snprintf(out, n, "%s", d);
    else if (val) {
        char *s = json_dumps(val, JSON_ENCODE_ANY | JSON_COMPACT);
        snprintf(out, n, "%s", s ? s : "?");
        free(s);
    } else snprintf(out, n, "%s", type ? type : "?");
}

/* Events: keep what the page reports as an error; stop on a crash. */
static void cdp_event(cdp *c, json_t *m) {
    const char *method = json_string_value(json_object_get(m, "method"));
    json_t *p = json_object_get(m, "params");
    char text[1024] = "";
    if (!method) return;
    if (!strcmp(method, "Runtime.exceptionThrown")) {
        json_t *d = json_object_get(p, "exceptionDetails");
        json_t *ex = json_object_get(d, "exception");
        if (ex) text_of_remote_object(ex, text, sizeof text);
        else snprintf(text, sizeof text, "%s", json_string_value(json_object_get(d, "text")) ? json_string_value(json_object_get(d, "text")) : "?");
        char e[1100];
        snprintf(e, sizeof e, "exception: %s", text);
        json_array_append_new(c->errors, json_string(e));
        printf("event: %s\n", e);
    } else if (!strcmp(method, "Runtime.consoleAPICalled")) {
        const char *type = json_string_value(json_object_get(p, "type"));
        if (type && (!strcmp(type, "error") || !strcmp(type, "assert"))) {
            json_t *args = json_object_get(p, "args");
            if (json_array_size(args)) text_of_remote_object(json_array_get(args, 0), text, sizeof text);
            char e[1100];
            snprintf(e, sizeof e, "console.%s: %s", type, text);
            json_array_append_new(c->errors, json_string(e));
            printf("event: %s\n", e);
        }
    } else if (!strcmp(method, "Log.entryAdded")) {
        json_t *entry = json_object_get(p, "entry");
        const char *level = json_string_value(json_object_get(entry, "level"));
        if (level && !strcmp(level, "error")) {
            const char *t = json_string_value(json_object_get(entry, "text"));
            const char *u = json_string_value(json_object_get(entry, "url"));
            char e[1100];
            snprintf(e, sizeof e, "log: %s (%s)", t ? t : "?", u ? u : "no url");
            json_array_append_new(c->errors, json_string(e));
            printf("event: %s\n", e);
        }
    } else if (!strcmp(method, "Inspector.targetCrashed")) {
        fail(c, "the page's renderer crashed (Inspector.targetCrashed)");
    } else if (!strcmp(method, "Inspector.detached") || !strcmp(method, "Target.detachedFromTarget")) {
        fail(c, "the DevTools session was detached (%s)", method);
    }
}

/* A command and its result (owned by the caller); events read meanwhile go
 * to cdp_event. A command that fails ends the run. */
static json_t *cdp_call(cdp *c, const char *method, json_t *params, int in_session) {
    int id = ++c->next_id;
    cdp_send(c, id, method, params, in_session);
    char what[256];
    snprintf(what, sizeof what, "waiting for the reply to %s%s%s%s", method, c->step ? " (" : "",
             c->step ? c->step : "", c->step ? ")" : "");
    double until = now_s() + 15;
    if (until > c->deadline) until = c->deadline;
    for (;;) {
        json_t *m = cdp_read(c, until, what);
        json_t *mid = json_object_get(m, "id");
        if (!mid) {
            cdp_event(c, m);
            json_decref(m);
            continue;
        }
        if (json_integer_value(mid) != id) { /* not ours: nothing else is in flight */
            json_decref(m);
            continue;
        }
        json_t *err = json_object_get(m, "error");
        if (err) {
            char *s = json_dumps(err, JSON_COMPACT);
            char msg[600];
            snprintf(msg, sizeof msg, "%s", s ? s : "?");
            free(s);
            json_decref(m);
            fail(c, "%s failed: %s", method, msg);
        }
        json_t *r = json_object_get(m, "result");
        r = r ? json_incref(r) : json_object();
        json_decref(m);
        return r;
    }
}

static void call_drop(cdp *c, const char *method, json_t *params) { json_decref(cdp_call(c, method, params, 1)); }

/* The page's value of a JavaScript expression that gives a string (JSON
 * where it is more); malloc'd. */
static char *page_eval(cdp *c, const char *expr) {
    json_t *r = cdp_call(c, "Runtime.evaluate",
                         json_pack("{s:s, s:b, s:b}", "expression", expr, "returnByValue", 1, "awaitPromise", 0), 1);
    json_t *ex = json_object_get(r, "exceptionDetails");
    if (ex) {
        char text[600] = "?";
        json_t *e = json_object_get(ex, "exception");
        if (e) text_of_remote_object(e, text, sizeof text);
        json_decref(r);
        fail(c, "evaluating %.80s... threw: %s", expr, text);
    }
    const char *v = json_string_value(json_object_get(json_object_get(r, "result"), "value"));
    if (!v) {
        json_decref(r);
        fail(c, "evaluating %.80s... gave no string", expr);
    }
    char *s = strdup(v);
    json_decref(r);
    return s;
}

/* Polls `expr` (which gives "yes", "no" or a reason to stop) every 50 ms. */
static void wait_until(cdp *c, const char *expr, const char *what, double seconds) {
    double t0 = now_s(), until = t0 + seconds;
    if (until > c->deadline) until = c->deadline;
    c->step = what;
    for (;;) {
        char *v = page_eval(c, expr);
        if (!strcmp(v, "yes")) {
            free(v);
            printf("step: %s: after %.2f s\n", what, now_s() - t0);
            c->step = NULL;
            return;
        }
        if (strcmp(v, "no")) {
            char msg[600];
            snprintf(msg, sizeof msg, "%s", v);
            free(v);
            fail(c, "while %s the page says: %s", what, msg);
        }
        free(v);
        if (now_s() > until) fail(c, "timed out after %.1f s while %s", now_s() - t0, what);
        usleep(50000);
    }
}

static int g_keys, g_clicks; /* sent, compared with what the page counted */

static void mouse(cdp *c, const char *type, double x, double y) {
    call_drop(c, "Input.dispatchMouseEvent",
              json_pack("{s:s, s:f, s:f, s:s, s:i, s:i}", "type", type, "x", x, "y", y, "button",
                        strcmp(type, "mouseMoved") ? "left" : "none", "buttons", strcmp(type, "mousePressed") ? 0 : 1,
                        "clickCount", strcmp(type, "mouseMoved") ? 1 : 0));
}

/* A left click at the middle of element `id` (scrolled into view first). */
static void click(cdp *c, const char *id) {
    char expr[300];
    snprintf(expr, sizeof expr,
             "(()=>{const e=document.getElementById('%s');if(!e)return 'none';e.scrollIntoView({block:'center'});"
             "const r=e.getBoundingClientRect();return JSON.stringify([r.x,r.y,r.width,r.height])})()",
             id);
    char *v = page_eval(c, expr);
    double x, y, w, h;
    if (sscanf(v, "[%lf,%lf,%lf,%lf]", &x, &y, &w, &h) != 4 || w <= 0 || h <= 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s", v);
        free(v);
        fail(c, "no box for #%s: %s", id, msg);
    }
    free(v);
    x += w / 2;
    y += h / 2;
    mouse(c, "mouseMoved", x, y);
    mouse(c, "mousePressed", x, y);
    mouse(c, "mouseReleased", x, y);
    g_clicks++;
    printf("step: clicked #%s at (%.0f, %.0f), its box %.0fx%.0f\n", id, x, y, w, h);
}

/* One key press: keydown, the character (if it types one), keyup. */
static void key(cdp *c, const char *k, const char *code, int vk, const char *text) {
    call_drop(c, "Input.dispatchKeyEvent",
              json_pack("{s:s, s:s, s:s, s:i, s:i}", "type", "rawKeyDown", "key", k, "code", code,
                        "windowsVirtualKeyCode", vk, "nativeVirtualKeyCode", vk));
    if (text)
        call_drop(c, "Input.dispatchKeyEvent",
                  json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "type", "char", "key", k, "code", code, "text", text,
                            "unmodifiedText", text, "windowsVirtualKeyCode", vk));
    call_drop(c, "Input.dispatchKeyEvent",
              json_pack("{s:s, s:s, s:s, s:i, s:i}", "type", "keyUp", "key", k, "code", code,
                        "windowsVirtualKeyCode", vk, "nativeVirtualKeyCode", vk));
    g_keys++;
}

/* The US-layout key of a printable ASCII character (code and virtual key). */
static void ascii_key(char ch, char *code, size_t n, int *vk) {
    static const char shifted_digits[] = ")!@#$%^&*(";
    static const struct {
        char a, b;
        const char *code;
        int vk;
    } punct[] = {{' ', ' ', "Space", 32},         {'-', '_', "Minus", 189},     {'=', '+', "Equal", 187},
                 {'[', '{', "BracketLeft", 219},  {']', '}', "BracketRight", 221}, {'\\', '|', "Backslash", 220},
                 {';', ':', "Semicolon", 186},    {'\'', '"', "Quote", 222},    {',', '<', "Comma", 188},
                 {'.', '>', "Period", 190},       {'/', '?', "Slash", 191},     {'`', '~', "Backquote", 192}};
    if (ch >= 'a' && ch <= 'z') {
        snprintf(code, n, "Key%c", ch - 'a' + 'A');
        *vk = ch - 'a' + 'A';
        return;
    }
    if (ch >= 'A' && ch <= 'Z') {
        snprintf(code, n, "Key%c", ch);
        *vk = ch;
        return;
    }
    if (ch >= '0' && ch <= '9') {
        snprintf(code, n, "Digit%c", ch);
        *vk = ch;
        return;
    }
    const char *d = strchr(shifted_digits, ch);
    if (d && ch) {
        snprintf(code, n, "Digit%d", (int)(d - shifted_digits));
        *vk = '0' + (int)(d - shifted_digits);
        return;
    }
    for (size_t i = 0; i < sizeof punct / sizeof punct[0]; i++)
        if (ch == punct[i].a || ch == punct[i].b) {
            snprintf(code, n, "%s", punct[i].code);
            *vk = punct[i].vk;
            return;
        }
    snprintf(code, n, "Unidentified");
    *vk = 0;
}

/* Types `s` (UTF-8) into the focused element: a key press for each ASCII
 * character, Input.insertText for each other character. */
static void type_text(cdp *c, const char *s, int *n_keys, int *n_inserts) {
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        if (*p < 0x80) {
            char k[2] = {(char)*p, 0}, code[32];
            int vk;
            if (*p < 0x20 || *p == 0x7f) fail(c, "cannot type control character 0x%02x", *p);
            ascii_key((char)*p, code, sizeof code, &vk);
            key(c, k, code, vk, k);
            (*n_keys)++;
            p++;
        } else {
            size_t n = *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : 2;
            char ch[5] = {0};
            for (size_t i = 0; i < n; i++) {
                if (!p[i] || (i && (p[i] & 0xc0) != 0x80)) fail(c, "the text to type is not UTF-8");
                ch[i] = (char)p[i];
            }
            call_drop(c, "Input.insertText", json_pack("{s:s}", "text", ch));
            (*n_inserts)++;
            p += n;
        }
    }
}

static size_t code_points(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* The value of field `id` must be exactly `want`. */
static void check_value(cdp *c, const char *id, const char *want) {
    char expr[120];
    snprintf(expr, sizeof expr, "document.getElementById('%s').value", id);
    char *v = page_eval(c, expr);
    printf("compare: #%s holds \"%s\"; typed \"%s\" -> %s\n", id, v, want, strcmp(v, want) ? "DIFFERENT" : "equal");
    if (strcmp(v, want)) {
        free(v);
        fail(c, "#%s does not hold the typed text", id);
    }
    free(v);
}

static int b64_value(int ch) {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
}

static void screenshot(cdp *c, const char *path) {
    json_t *r = cdp_call(c, "Page.captureScreenshot", json_pack("{s:s}", "format", "png"), 1);
    const char *d = json_string_value(json_object_get(r, "data"));
    size_t n = d ? strlen(d) : 0, o = 0;
    unsigned char *png = malloc(n / 4 * 3 + 3);
    if (!png) fail(c, "out of memory");
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n && d[i] != '='; i++) {
        int v = b64_value((unsigned char)d[i]);
        if (v < 0) {
            free(png);
            json_decref(r);
            fail(c, "Page.captureScreenshot gave data that is not base64");
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            png[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    json_decref(r);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(png, 1, o, f) != o || fclose(f) != 0) {
        free(png);
        fail(c, "cannot write %s", path);
    }
    printf("step: screenshot, %zu bytes of PNG, in %s\n", o, path);
    free(png);
}

/* What the page shows after an answer: state, error, answer, mark, rows. */
static const char k_read_page[] =
    "JSON.stringify({state:document.body.dataset.state||'',error:document.getElementById('error').textContent,"
    "hidden:document.getElementById('result').hidden,answer:document.getElementById('answer').textContent,"
    "mark:(document.getElementById('mark')||{textContent:null}).textContent,"
    "view:document.getElementById('context-view').textContent,"
    "rows:Array.from(document.querySelectorAll('#nbest tr')).map(tr=>Array.from(tr.cells).map(td=>td.textContent))})";

/* Listeners that count the trusted input events the page receives. */
static const char k_count_events[] =
    "(()=>{window.__cdp={untrusted:0};for(const t of ['keydown','keypress','keyup','input','mousedown','click','submit']){"
    "__cdp[t]=0;document.addEventListener(t,e=>{if(e.isTrusted)__cdp[t]++;else __cdp.untrusted++},true)}"
    "return 'ok'})()";

static const char k_answered[] =
    "(()=>{const e=document.getElementById('error').textContent;if(e)return 'error shown: '+e;"
    "return document.body.dataset.state==='answered'&&!document.getElementById('result').hidden?'yes':'no'})()";

static void usage(void) {
    fprintf(stderr, "usage: cdp_drive --browser PATH --url URL --dir DIR --out FILE.json --context TEXT "
                    "--question TEXT [--question TEXT ...] [--screenshot FILE.png] [--timeout SECONDS]\n");
    exit(2);
}

typedef struct {
    const char *browser, *url, *dir, *out, *context, *shot;
    const char *questions[MAX_QUESTIONS];
    int nq;
    double timeout;
} opts;

static void parse_args(int argc, char **argv, opts *o) {
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *a = argv[i], *v = argv[++i];
        if (!strcmp(a, "--browser")) o->browser = v;
        else if (!strcmp(a, "--url")) o->url = v;
        else if (!strcmp(a, "--dir")) o->dir = v;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--context")) o->context = v;
        else if (!strcmp(a, "--screenshot")) o->shot = v;
        else if (!strcmp(a, "--timeout")) {
            char *end;
            o->timeout = strtod(v, &end);
            if (*end || !(o->timeout >= 1 && o->timeout <= 600)) usage();
        } else if (!strcmp(a, "--question") && o->nq < MAX_QUESTIONS) o->questions[o->nq++] = v;
        else usage();
    }
    if (!o->browser || !o->url || !o->dir || !o->out || !o->context || !o->nq) usage();
}

/* A tab attached with a flat session, the page at url loaded, and the
 * listeners counting its trusted events in place. */
static void open_page(cdp *c, const char *url, double t0) {
    json_t *r = cdp_call(c, "Target.createTarget", json_pack("{s:s}", "url", "about:blank"), 0);
    char target[128];
    snprintf(target, sizeof target, "%s", json_string_value(json_object_get(r, "targetId")) ? json_string_value(json_object_get(r, "targetId")) : "");
    json_decref(r);
    if (!target[0]) fail(c, "Target.createTarget gave no targetId");
    r = cdp_call(c, "Target.attachToTarget", json_pack("{s:s, s:b}", "targetId", target, "flatten", 1), 0);
    const char *sid = json_string_value(json_object_get(r, "sessionId"));
    snprintf(c->session, sizeof c->session, "%s", sid ? sid : "");
    json_decref(r);
    if (!c->session[0]) fail(c, "Target.attachToTarget gave no sessionId");
    printf("step: browser up after %.2f s; tab %s, session %s\n", now_s() - t0, target, c->session);

    call_drop(c, "Runtime.enable", NULL);
    call_drop(c, "Log.enable", NULL);
    call_drop(c, "Page.enable", NULL);
    call_drop(c, "Emulation.setFocusEmulationEnabled", json_pack("{s:b}", "enabled", 1));
    r = cdp_call(c, "Page.navigate", json_pack("{s:s}", "url", url), 1);
    const char *nav_err = json_string_value(json_object_get(r, "errorText"));
    if (nav_err) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s", nav_err);
        json_decref(r);
        fail(c, "Page.navigate %s: %s", url, msg);
    }
    json_decref(r);
    printf("step: navigated to %s\n", url);
    wait_until(c,
               "document.readyState==='complete'&&document.getElementById('ask')&&document.getElementById('context')?'yes':'no'",
               "waiting for the page to load", 15);
    char *ok = page_eval(c, k_count_events);
    free(ok);
}

/* What was typed: the page's input events must come to their sum. */
typedef struct {
    int keys, inserts, backspaces;
} typed;

/* Question q: typed (after the context, for the first; after clearing the
 * previous one, for the others), sent, and what the page then shows
 * appended to c->rounds. */
static void ask(cdp *c, const opts *o, int q, typed *t) {
    double tq = now_s();
    if (q == 0) {
        click(c, "context");
        int k0 = t->keys, i0 = t->inserts;
        type_text(c, o->context, &t->keys, &t->inserts);
        printf("step: typed the context: %d key presses, %d inserted characters\n", t->keys - k0, t->inserts - i0);
        check_value(c, "context", o->context);
        click(c, "question");
    } else {
        free(page_eval(c, "(()=>{delete document.body.dataset.state;return 'ok'})()"));
        click(c, "question");
        key(c, "End", "End", 35, NULL);
        size_t n = code_points(o->questions[q - 1]);
        for (size_t i = 0; i < n; i++) key(c, "Backspace", "Backspace", 8, NULL);
        t->backspaces += (int)n;
        printf("step: End, then %zu x Backspace\n", n);
        check_value(c, "question", "");
    }
    int k0 = t->keys, i0 = t->inserts;
    type_text(c, o->questions[q], &t->keys, &t->inserts);
    printf("step: typed question %d: %d key presses, %d inserted characters\n", q + 1, t->keys - k0, t->inserts - i0);
    check_value(c, "question", o->questions[q]);
    if (q == 0) {
        key(c, "Enter", "Enter", 13, "\r");
        printf("step: pressed Enter in the question box\n");
    } else {
        click(c, "ask");
    }
    wait_until(c, k_answered, "waiting for the answer", 20);
    char *page = page_eval(c, k_read_page);
    json_error_t je;
    json_t *shown = json_loads(page, 0, &je);
    free(page);
    if (!shown) fail(c, "the page's state is not JSON: %s", je.text);
    json_object_set_new(shown, "question", json_string(o->questions[q]));
    json_object_set_new(shown, "seconds", json_real(now_s() - tq));
    printf("page: question \"%s\" -> answer \"%s\", mark \"%s\", %zu n-best rows\n", o->questions[q],
           json_string_value(json_object_get(shown, "answer")),
           json_string_value(json_object_get(shown, "mark")) ? json_string_value(json_object_get(shown, "mark")) : "(none)",
           json_array_size(json_object_get(shown, "rows")));
    json_array_append_new(c->rounds, shown);
}

/* The page's count of trusted events against what was sent, and its
 * errors; writes the JSON, closes chromium; returns the exit status. */
static int judge(cdp *c, const opts *o, const typed *t, double t0) {
    /* Events still on the pipe (a late console error) before judging. */
    call_drop(c, "Runtime.evaluate", json_pack("{s:s}", "expression", "0"));

    char *counts_s = page_eval(c, "JSON.stringify(window.__cdp)");
    json_t *counts = json_loads(counts_s, 0, NULL);
    free(counts_s);
    if (!counts) fail(c, "no event counts");
    int nq = o->nq, want_keys = g_keys, want_input = t->keys + t->inserts + t->backspaces;
    long got_keydown = (long)json_integer_value(json_object_get(counts, "keydown"));
    long got_keyup = (long)json_integer_value(json_object_get(counts, "keyup"));
    long got_input = (long)json_integer_value(json_object_get(counts, "input"));
    long got_click = (long)json_integer_value(json_object_get(counts, "mousedown"));
    long got_submit = (long)json_integer_value(json_object_get(counts, "submit"));
    long untrusted = (long)json_integer_value(json_object_get(counts, "untrusted"));
    printf("compare: trusted keydown %ld, keyup %ld (sent %d key presses); input %ld (want %d); mousedown %ld (sent %d clicks); "
           "submit %ld (want %d); untrusted %ld (want 0)\n",
           got_keydown, got_keyup, want_keys, got_input, want_input, got_click, g_clicks, got_submit, nq, untrusted);
    int bad = got_keydown != want_keys || got_keyup != want_keys || got_input != want_input || got_click != g_clicks ||
              got_submit != nq || untrusted != 0;

    printf("compare: %zu errors logged by the page (want 0)\n", json_array_size(c->errors));

    json_t *result = json_pack("{s:O, s:o, s:O, s:f}", "rounds", c->rounds, "events", counts, "errors", c->errors,
                               "seconds", now_s() - t0);
    if (json_dump_file(result, o->out, JSON_INDENT(1)) != 0) {
        json_decref(result);
        fail(c, "cannot write %s", o->out);
    }
    json_decref(result);
    int errors = (int)json_array_size(c->errors);
    browser_kill(c, 2);
    cdp_free(c);
    printf("step: chromium closed; %.2f s in all\n", now_s() - t0);
    if (bad) fprintf(stderr, "cdp_drive: FAIL: the page did not receive the input events that were sent\n");
    if (errors) fprintf(stderr, "cdp_drive: FAIL: the page logged %d errors\n", errors);
    return bad || errors ? 1 : 0;
}

int main(int argc, char **argv) {
    opts o = {.timeout = 45};
    parse_args(argc, argv, &o);

    cdp cx = {.pid = -1, .wfd = -1, .rfd = -1, .errors = json_array(), .rounds = json_array()}, *c = &cx;
    c->deadline = now_s() + o.timeout;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a write to a dead chromium is an EPIPE we report */
    alarm((unsigned)o.timeout + 5);
    setvbuf(stdout, NULL, _IOLBF, 0);

    static char profile[4096], log[4096];
    snprintf(profile, sizeof profile, "%s/profile", o.dir);
    snprintf(log, sizeof log, "%s/chromium.log", o.dir);
    c->log = log;
    double t0 = now_s();
    browser_start(c, o.browser, profile);
    open_page(c, o.url, t0);
    typed t = {0};
    for (int q = 0; q < o.nq; q++) ask(c, &o, q, &t);
    if (o.shot) screenshot(c, o.shot);
    return judge(c, &o, &t, t0);
}
