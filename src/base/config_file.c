/* SPDX-License-Identifier: BSD-3-Clause */
/* config_file.c - see config_file.h. A reader for one flat JSON object (RFC 8259 strings,
 * numbers, true and false; no nesting, no null), written for this purpose only; it includes
 * nothing of config.h. */
#include "build_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_file.h"
#include "util.h"

typedef struct {
    const char *s;
    size_t n, i;
    const char *what;
    char *err;
    size_t errlen;
    const char *key;      /* the key whose value is being read, for messages, or NULL */
    const char *prev;     /* the last key read in full, or NULL */
    size_t at, line, col; /* the line and column of byte `at`, where the last look ended */
    int lists;            /* a value may be a list of strings and numbers (a record's) */
} Reader;

/* The line and column (from 1) of byte `pos`, counted on from the last position asked for
 * (keys come in order), or from the start when pos lies before it. */
static void line_col(Reader *r, size_t pos, size_t *line, size_t *col) {
    if (pos > r->n) pos = r->n;
    if (pos < r->at) { r->at = 0; r->line = 1; r->col = 1; }
    for (; r->at < pos; r->at++) {
        if (r->s[r->at] == '\n') { r->line++; r->col = 1; } else r->col++;
    }
    *line = r->line;
    *col = r->col;
}

/* "FILE: malformed JSON at line L, column C (key "K"): MSG" */
static int malformed(Reader *r, const char *msg) {
    size_t line, col;
    line_col(r, r->i, &line, &col);
    char at[160] = "";
    if (r->key) snprintf(at, sizeof at, " (key \"%.100s\")", r->key);
    else if (r->prev) snprintf(at, sizeof at, " (after key \"%.100s\")", r->prev);
    snprintf(r->err, r->errlen, "%s: malformed JSON at line %zu, column %zu%s: %s", QUOTED(r->what), line, col, at, msg);
    return -1;
}

static void skip_ws(Reader *r) {
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' || r->s[r->i] == '\r')) r->i++;
}

static int hex4(Reader *r, unsigned *v) {
    if (r->n - r->i < 4) return malformed(r, "a \\u escape needs 4 hex digits");
    unsigned x = 0;
    for (int k = 0; k < 4; k++) {
        char ch = r->s[r->i++];
        x <<= 4;
        if (ch >= '0' && ch <= '9') x |= (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f') x |= (unsigned)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F') x |= (unsigned)(ch - 'A' + 10);
        else return malformed(r, "a \\u escape needs 4 hex digits");
    }
    *v = x;
    return 0;
}

static void put_utf8(char *out, size_t *o, unsigned cp) {
    if (cp < 0x80) {
        out[(*o)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*o)++] = (char)(0xC0 | (cp >> 6));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*o)++] = (char)(0xE0 | (cp >> 12));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*o)++] = (char)(0xF0 | (cp >> 18));
        out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* A string at r->i (the opening quote), decoded into a malloc'd NUL-terminated *out. The
 * decoded text is never longer than the escaped one, so n - i + 1 bytes suffice. */
static int read_string(Reader *r, char **out) {
    r->i++;   /* the quote */
    char *buf = mallocCheck(r->n - r->i + 1);
    size_t o = 0;
    for (;;) {
        if (r->i >= r->n) { free(buf); return malformed(r, "the string does not end"); }
        unsigned char ch = (unsigned char)r->s[r->i++];
        if (ch == '"') break;
        if (ch < 0x20) { free(buf); r->i--; return malformed(r, "a control character inside a string"); }
        if (ch != '\\') { buf[o++] = (char)ch; continue; }
        if (r->i >= r->n) { free(buf); return malformed(r, "the string does not end"); }
        char e = r->s[r->i++];
        switch (e) {
        case '"': buf[o++] = '"'; break;
        case '\\': buf[o++] = '\\'; break;
        case '/': buf[o++] = '/'; break;
        case 'b': buf[o++] = '\b'; break;
        case 'f': buf[o++] = '\f'; break;
        case 'n': buf[o++] = '\n'; break;
        case 'r': buf[o++] = '\r'; break;
        case 't': buf[o++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (hex4(r, &cp)) { free(buf); return -1; }
            if (cp >= 0xD800 && cp < 0xDC00) {   /* a surrogate pair: \uD8xx\uDCxx (12 bytes, 4 out) */
                unsigned lo;
                if (r->n - r->i < 2 || r->s[r->i] != '\\' || r->s[r->i + 1] != 'u') {
                    free(buf);
                    return malformed(r, "a high surrogate without its low one");
                }
                r->i += 2;
                if (hex4(r, &lo)) { free(buf); return -1; }
                if (lo < 0xDC00 || lo >= 0xE000) { free(buf); return malformed(r, "a high surrogate without its low one"); }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC80 && cp < 0xDD00) {   /* a byte that is not UTF-8, as config.json writes it */
                buf[o++] = (char)(cp & 0xFF);
                break;
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                free(buf);
                return malformed(r, "a low surrogate without its high one");
            }
            if (cp == 0) { free(buf); return malformed(r, "\\u0000 inside a string"); }
            put_utf8(buf, &o, cp);
            break;
        }
        default:
            free(buf);
            r->i--;
            return malformed(r, "an unknown escape in a string");
        }
    }
    buf[o] = '\0';
    *out = buf;
    return 0;
}

/* A JSON number at r->i; *out gets its text as written (malloc'd). */
static int read_number(Reader *r, char **out) {
    const size_t b = r->i;
    if (r->i < r->n && r->s[r->i] == '-') r->i++;
    if (r->i >= r->n || r->s[r->i] < '0' || r->s[r->i] > '9') return malformed(r, "a number needs a digit");
    if (r->s[r->i] == '0') r->i++;
    else while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
    if (r->i < r->n && r->s[r->i] == '.') {
        r->i++;
        if (r->i >= r->n || r->s[r->i] < '0' || r->s[r->i] > '9') return malformed(r, "a digit must follow the decimal point");
        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
    }
    if (r->i < r->n && (r->s[r->i] == 'e' || r->s[r->i] == 'E')) {
        r->i++;
        if (r->i < r->n && (r->s[r->i] == '+' || r->s[r->i] == '-')) r->i++;
        if (r->i >= r->n || r->s[r->i] < '0' || r->s[r->i] > '9') return malformed(r, "a digit must follow the exponent");
        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
    }
    const size_t len = r->i - b;
    if (len > 64) return malformed(r, "a number of more than 64 characters");
    char *t = mallocCheck(len + 1);
    memcpy(t, r->s + b, len);
    t[len] = '\0';
    *out = t;
    return 0;
}

static int literal(Reader *r, const char *word) {
    size_t l = strlen(word);
    if (r->n - r->i < l || memcmp(r->s + r->i, word, l) != 0) return 0;
    r->i += l;
    return 1;
}

static const char *const k_kind_name[] = { "a string", "a number", "true or false", "a list" };

const char *json_kind_name(JsonKind kind) {
    return (unsigned)kind < sizeof k_kind_name / sizeof k_kind_name[0] ? k_kind_name[kind] : "?";
}

/* What read_object does with a value that is an array: records, when the key is `array_key`. */
typedef struct {
    const char *array_key;
    JsonPairFn rec_fn;
    JsonRecordFn end_fn;
    void *ctx;
    size_t n_records;
} Records;

static int read_records(Reader *r, Records *rec, char *e, size_t elen);

/* [ v, v, ... ] of strings and numbers from r->i into *out (malloc'd): each element as 's' or
 * 'n' and its text, the elements joined by '\n' (JSON_FLAT_LIST). */
static int read_list(Reader *r, char **out) {
    size_t len = 0, cap = 64;
    char *buf = mallocCheck(cap);
    buf[0] = '\0';
    r->i++;   /* '[' */
    skip_ws(r);
    if (r->i < r->n && r->s[r->i] == ']') { r->i++; *out = buf; return 0; }
    for (;;) {
        skip_ws(r);
        char *v = NULL;
        char type;
        if (r->i < r->n && r->s[r->i] == '"') {
            if (read_string(r, &v)) { free(buf); return -1; }
            type = 's';
            if (strchr(v, '\n')) {
                free(v);
                free(buf);
                return malformed(r, "a list's strings hold no line breaks");
            }
        } else if (r->i < r->n && (r->s[r->i] == '-' || (r->s[r->i] >= '0' && r->s[r->i] <= '9'))) {
            if (read_number(r, &v)) { free(buf); return -1; }
            type = 'n';
        } else {
            free(buf);
            return malformed(r, "a list holds strings and numbers");
        }
        const size_t need = len + strlen(v) + 3;
        if (need > cap) {
            while (cap < need) cap *= 2;
            char *grown = realloc(buf, cap);
            CHECK(grown != NULL);
            buf = grown;
        }
        len += (size_t)sprintf(buf + len, "%s%c%s", len ? "\n" : "", type, v);
        free(v);
        skip_ws(r);
        if (r->i < r->n && r->s[r->i] == ',') { r->i++; continue; }
        if (r->i < r->n && r->s[r->i] == ']') { r->i++; break; }
        free(buf);
        return malformed(r, "expected ',' or ']' in a list");
    }
    *out = buf;
    return 0;
}

/* One object from r->i, its pairs to fn; rec (may be NULL) takes the array of records. */
/* On success *last (may be NULL) takes the object's last key, for messages about what follows it. */
static int read_object(Reader *r, JsonPairFn fn, void *ctx, Records *rec, char *e, size_t elen, char **last) {
    char **seen = NULL;   /* keys read so far, for repeats */
    size_t n_seen = 0;
    char *key = NULL, *val = NULL;
    const char *outer_prev = r->prev;
    int rc = -1;
    r->prev = NULL;
    if (r->i >= r->n || r->s[r->i] != '{') { malformed(r, "expected '{'"); goto out; }
    r->i++;
    skip_ws(r);
    if (r->i < r->n && r->s[r->i] == '}') { r->i++; rc = 0; goto out; }
    for (;;) {
        r->key = NULL;
        skip_ws(r);
        if (r->i >= r->n || r->s[r->i] != '"') { malformed(r, "expected a key in double quotes"); goto out; }
        size_t key_line, key_col;
        line_col(r, r->i, &key_line, &key_col);
        const size_t key_at = r->i;
        if (read_string(r, &key)) goto out;
        if (name_needs_quoting(key)) {   /* never printed raw; no option is named so */
            char m[QUOTE_BUF + 96];
            snprintf(m, sizeof m, "a key holding a control character or a byte that is not UTF-8: %s", QUOTED(key));
            r->i = key_at;   /* the message gives the key's line and column */
            malformed(r, m);
            goto out;
        }
        r->key = key;
        skip_ws(r);
        if (r->i >= r->n || r->s[r->i] != ':') { malformed(r, "expected ':' after the key"); goto out; }
        r->i++;
        skip_ws(r);
        if (r->i >= r->n) { malformed(r, "expected a value"); goto out; }
        for (size_t k = 0; k < n_seen; k++) {
            if (!strcmp(seen[k], key)) {
                snprintf(r->err, r->errlen, "%s: key \"%s\" appears twice", QUOTED(r->what), key);
                goto out;
            }
        }
        JsonKind kind;
        const char ch = r->s[r->i];
        int array = 0;
        if (ch == '"') {
            if (read_string(r, &val)) goto out;
            kind = JSON_FLAT_STRING;
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
            if (read_number(r, &val)) goto out;
            kind = JSON_FLAT_NUMBER;
        } else if (literal(r, "true")) {
            val = strdup("true");
            kind = JSON_FLAT_BOOL;
        } else if (literal(r, "false")) {
            val = strdup("false");
            kind = JSON_FLAT_BOOL;
        } else if (ch == '[' && r->lists) {
            if (read_list(r, &val)) goto out;
            kind = JSON_FLAT_LIST;
        } else if (ch == '[' && rec && !strcmp(key, rec->array_key)) {
            if (read_records(r, rec, e, elen)) goto out;
            array = 1;
            kind = JSON_FLAT_STRING;
        } else if (ch == '{' || ch == '[') {
            if (rec) {
                char msg[160];
                snprintf(msg, sizeof msg, "a value must be a string, a number, true or false (only \"%s\" holds a list)",
                         rec->array_key);
                malformed(r, msg);
            } else {
                malformed(r, "a value must be a string, a number, true or false (the object is flat)");
            }
            goto out;
        } else if (literal(r, "null")) {
            r->i -= 4;
            malformed(r, "a value must be a string, a number, true or false, not null");
            goto out;
        } else {
            malformed(r, "expected a value (a string, a number, true or false)");
            goto out;
        }
        if (!array) {
            CHECK(val != NULL);
            e[0] = '\0';
            if (fn(ctx, key, kind, val, key_line, key_col, e, elen) != 0) {
                snprintf(r->err, r->errlen, "%s: %s", QUOTED(r->what), e);
                goto out;
            }
        }
        char **grown = realloc(seen, (n_seen + 1) * sizeof *seen);
        CHECK(grown != NULL);
        seen = grown;
        seen[n_seen++] = key;
        r->prev = key;
        r->key = NULL;
        key = NULL;
        free(val);
        val = NULL;
        skip_ws(r);
        if (r->i < r->n && r->s[r->i] == ',') { r->i++; continue; }
        if (r->i < r->n && r->s[r->i] == '}') { r->i++; break; }
        malformed(r, "expected ',' or '}' after a value");
        goto out;
    }
    rc = 0;
out:
    free(key);
    free(val);
    r->key = NULL;
    r->prev = rc == 0 ? outer_prev : r->prev;
    if (rc == 0 && last && n_seen) *last = seen[--n_seen];
    if (rc != 0) r->prev = NULL;   /* the message is written: the keys go */
    for (size_t k = 0; k < n_seen; k++) free(seen[k]);
    free(seen);
    return rc;
}

/* [ {record}, {record}, ... ] from r->i */
static int read_records(Reader *r, Records *rec, char *e, size_t elen) {
    r->i++;   /* '[' */
    skip_ws(r);
    if (r->i < r->n && r->s[r->i] == ']') { r->i++; return 0; }
    for (;;) {
        skip_ws(r);
        if (r->i >= r->n || r->s[r->i] != '{') return malformed(r, "expected '{' (each element of the list is an object)");
        size_t line, col;
        line_col(r, r->i, &line, &col);
        const char *key = r->key;
        r->lists = 1;
        const int rc = read_object(r, rec->rec_fn, rec->ctx, NULL, e, elen, NULL);
        r->lists = 0;
        if (rc) return -1;
        r->key = key;
        e[0] = '\0';
        if (rec->end_fn(rec->ctx, rec->n_records++, line, col, e, elen) != 0) {
            snprintf(r->err, r->errlen, "%s: %s", QUOTED(r->what), e);
            return -1;
        }
        skip_ws(r);
        if (r->i < r->n && r->s[r->i] == ',') { r->i++; continue; }
        if (r->i < r->n && r->s[r->i] == ']') { r->i++; return 0; }
        return malformed(r, "expected ',' or ']' after an object");
    }
}

static int read_top(const char *text, size_t len, const char *what, JsonPairFn fn, Records *rec, void *ctx, char *err,
                    size_t errlen) {
    Reader r = { text, len, 0, what, err, errlen, NULL, NULL, 0, 1, 1, 0 };
    char *e = mallocCheck(errlen ? errlen : 1);   /* fn's message, before "WHAT: " */
    char *last = NULL;
    int rc = -1;
    skip_ws(&r);
    if (r.i >= r.n || r.s[r.i] != '{') { malformed(&r, "expected '{' (the file must hold one JSON object)"); goto out; }
    if (read_object(&r, fn, ctx, rec, e, errlen ? errlen : 1, &last)) goto out;
    r.prev = last;
    skip_ws(&r);
    if (r.i != r.n) { malformed(&r, "text after the object"); goto out; }
    rc = 0;
out:
    free(e);
    free(last);
    return rc;
}

int json_flat_read(const char *text, size_t len, const char *what, JsonPairFn fn, void *ctx, char *err,
                   size_t errlen) {
    return read_top(text, len, what, fn, NULL, ctx, err, errlen);
}

int json_records_read(const char *text, size_t len, const char *what, JsonPairFn head_fn, const char *array_key,
                      JsonPairFn rec_fn, JsonRecordFn end_fn, void *ctx, char *err, size_t errlen) {
    Records rec = {array_key, rec_fn, end_fn, ctx, 0};
    return read_top(text, len, what, head_fn, &rec, ctx, err, errlen);
}

char *json_read_text(const char *path, size_t *len, char *err, size_t errlen) {
    /* A regular file only: a FIFO or a terminal would wait for a writer (O_NONBLOCK) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    CHECK(f != NULL);
    char *buf = mallocCheck(JSON_FLAT_MAX_BYTES + 1);
    const size_t got = fread(buf, 1, JSON_FLAT_MAX_BYTES + 1, f);
    const int bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: cannot be read", path);
    } else if (got > JSON_FLAT_MAX_BYTES) {
        snprintf(err, errlen, "%s: larger than %u bytes: not a ddptrain file", path, JSON_FLAT_MAX_BYTES);
    } else {
        *len = got;
        return buf;
    }
    free(buf);
    return NULL;
}

int json_flat_read_file(const char *path, JsonPairFn fn, void *ctx, char *err, size_t errlen) {
    size_t len;
    char *buf = json_read_text(path, &len, err, errlen);
    if (!buf) return -1;
    const int rc = json_flat_read(buf, len, path, fn, ctx, err, errlen);
    free(buf);
    return rc;
}

int json_records_read_file(const char *path, JsonPairFn head_fn, const char *array_key, JsonPairFn rec_fn,
                           JsonRecordFn end_fn, void *ctx, char *err, size_t errlen) {
    size_t len;
    char *buf = json_read_text(path, &len, err, errlen);
    if (!buf) return -1;
    const int rc = json_records_read(buf, len, path, head_fn, array_key, rec_fn, end_fn, ctx, err, errlen);
    free(buf);
    return rc;
}
