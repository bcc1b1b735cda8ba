/* SPDX-License-Identifier: BSD-3-Clause */
/* metrics_tags.c - see metrics_tags.h. */
#include "metrics_tags.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_file.h"
#include "util.h"

#define KEY_MAX 64      /* longer keys (none of ddptrain's) are left out: their tag would not fit */
#define EVENT_MAX 48

/* What the reader collects: the numbers in the order of the text, the step, the event. */
typedef struct {
    struct { char key[KEY_MAX]; double value; } num[METRICS_TAGS_MAX];
    size_t n;
    int has_step, has_test;
    double step;
    char event[EVENT_MAX];   /* "" for none */
} Record;

static int on_pair(void *ctx, const char *key, JsonKind kind, const char *value, size_t line, size_t column,
                   char *err, size_t errlen) {
    (void)line, (void)column, (void)err, (void)errlen;
    Record *r = ctx;
    if (!strncmp(key, "test_", 5)) r->has_test = 1;
    if (kind == JSON_FLAT_STRING && !strcmp(key, "event")) {
        /* the event's name becomes a part of the tag: only characters a tag shows plainly */
        size_t i = 0;
        for (; value[i] && i < EVENT_MAX - 1; i++) {
            const char c = value[i];
            r->event[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                                  c == '-' || c == '.'
                              ? c
                              : '_';
        }
        r->event[i] = '\0';
        return 0;
    }
    if (kind != JSON_FLAT_NUMBER) return 0;
    const double v = strtod(value, NULL);   /* JSON's number syntax is strtod's */
    if (!strcmp(key, "step")) {
        r->has_step = 1;
        r->step = v;
        return 0;
    }
    if (strlen(key) >= KEY_MAX || r->n == METRICS_TAGS_MAX) return 0;
    snprintf(r->num[r->n].key, KEY_MAX, "%s", key);
    r->num[r->n].value = v;
    r->n++;
    return 0;
}

/* s's tag: group '/' name; 0, or -1 when it does not fit (left out). */
static int set_tag(TfScalar *s, const char *group, const char *name) {
    const int w = snprintf(s->tag, sizeof s->tag, "%s/%s", group, name);
    return w > 0 && (size_t)w < sizeof s->tag ? 0 : -1;
}

size_t metrics_tags_shares(TfScalar *s, const char *group, double data_sec, double compute_sec, double comm_sec) {
    const double total = data_sec + compute_sec + comm_sec;
    if (!(total > 0.0)) return 0;
    const struct { const char *name; double sec; } part[3] = {
        {"data_share", data_sec}, {"compute_share", compute_sec}, {"comm_share", comm_sec}};
    for (int i = 0; i < 3; i++) {
        if (set_tag(&s[i], group, part[i].name) != 0) return 0;
        s[i].value = part[i].sec / total;
    }
    return 3;
}

/* The value of the number `key` of r, or NAN when it has none. */
static double number(const Record *r, const char *key) {
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->num[i].key, key)) return r->num[i].value;
    return NAN;
}

int metrics_tags_read(const char *json, int64_t *step, TfScalar *s, size_t max, char *err, size_t errlen) {
    Record *r = callocCheck(1, sizeof *r);
    if (json_flat_read(json, strlen(json), "metrics record", on_pair, r, err, errlen) != 0) {
        free(r);
        return -1;
    }
    if (!r->has_step) {
        free(r);
        return 0;
    }
    *step = (int64_t)r->step;
    char group[EVENT_MAX + 16];
    const double rank = r->event[0] ? number(r, "rank") : NAN;
    const int rank_group = rank >= 0 && rank < 1e9;   /* false for NAN: no rank */
    if (rank_group) snprintf(group, sizeof group, "%s/rank/%03d", r->event, (int)rank);
    else snprintf(group, sizeof group, "%s", r->event[0] ? r->event : r->has_test ? "test" : "train");
    /* the prefix a key loses: "test_" in the test group */
    char prefix[EVENT_MAX + 2];
    snprintf(prefix, sizeof prefix, "%s_", r->event[0] ? r->event : r->has_test ? "test" : "train");
    size_t n = 0;
    for (size_t i = 0; i < r->n && n < max; i++) {
        const char *key = r->num[i].key;
        if (rank_group && !strcmp(key, "rank")) continue;   /* in the group */
        const char *name = !strncmp(key, prefix, strlen(prefix)) && key[strlen(prefix)] ? key + strlen(prefix) : key;
        if (set_tag(&s[n], group, name) != 0) continue;
        s[n].value = r->num[i].value;
        n++;
    }
    const double data = number(r, "data_sec"), compute = number(r, "compute_sec"), comm = number(r, "comm_wait_sec");
    if (!isnan(data) && !isnan(compute) && !isnan(comm) && n + 3 <= max)
        n += metrics_tags_shares(s + n, group, data, compute, comm);
    free(r);
    return (int)n;
}
