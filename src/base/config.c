/* SPDX-License-Identifier: BSD-3-Clause */
/* config.c - parsing, validation, help and JSON for the option table; the keys and values of a
 * --config file (config_file.c reads the JSON, this file says what its keys mean). */
#include "build_config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stddef.h>

#include "config.h"
#include "config_file.h"
#include "util.h"

/* T_SWITCH: auto, on or off (CONFIG_AUTO, 1, 0), spelt as a boolean too: --name is on and
 * --no-name off, as a BOOL's, and true/false mean on/off, so that files and scripts written
 * when the option was a BOOL keep their meaning. */
typedef enum { T_INT, T_FLOAT, T_BOOL, T_STR, T_CHOICE, T_SWITCH } OptType;

typedef struct {
    const char *name;
    OptType type;
    const char *def;
    double min, max;
    const char *choices;      /* CHOICE only */
    const char *help;
    size_t offset;
} OptDesc;

/* min/max columns hold a '|' list for CHOICE and numbers otherwise; these pick the right one. */
#define OPT_NUM(v) _Generic((v), char *: 0.0, default: (v))
#define OPT_STR(v) _Generic((v), char *: (v), default: NULL)

static const OptDesc k_opts[] = {
#define X(name, type, def, min, max, help) \
    { #name, T_##type, def, OPT_NUM(min), OPT_NUM(max), OPT_STR(min), help, offsetof(Config, name) },
    DDP_CONFIG_TABLE(X)
#undef X
};
static const size_t k_nopts = sizeof k_opts / sizeof k_opts[0];

static const OptDesc *find_opt(const char *name, size_t len) {
    for (size_t i = 0; i < k_nopts; i++)
        if (strlen(k_opts[i].name) == len && strncmp(k_opts[i].name, name, len) == 0) return &k_opts[i];
    return NULL;
}

static int parse_value(Config *c, const OptDesc *o, const char *v, char *err, size_t errlen) {
    void *field = (char *)c + o->offset;
    char *end = NULL;
    switch (o->type) {
    case T_INT: {
        errno = 0;
        long x = strtol(v, &end, 10);
        if (*v == '\0' || *end != '\0' || errno == ERANGE) {
            snprintf(err, errlen, "--%s: '%s' is not an integer", o->name, v);
            return -1;
        }
        if ((double)x < o->min || (double)x > o->max) {
            snprintf(err, errlen, "--%s: %ld is out of range [%.17g, %.17g]", o->name, x, o->min, o->max);
            return -1;
        }
        *(long *)field = x;
        return 0;
    }
    case T_FLOAT: {
        errno = 0;
        double x = strtod(v, &end);
        if (*v == '\0' || *end != '\0' || errno == ERANGE || !isfinite(x)) {
            snprintf(err, errlen, "--%s: '%s' is not a finite number", o->name, v);
            return -1;
        }
        if (x < o->min || x > o->max) {
            snprintf(err, errlen, "--%s: %g is out of range [%g, %g]", o->name, x, o->min, o->max);
            return -1;
        }
        *(double *)field = x;
        return 0;
    }
    case T_SWITCH:
        if (!strcmp(v, "auto")) {
            *(int *)field = CONFIG_AUTO;
            return 0;
        }
        if (parse_value(c, &(OptDesc){ .name = o->name, .type = T_BOOL, .offset = o->offset }, v, err, errlen) == 0)
            return 0;
        snprintf(err, errlen, "--%s: '%s' is not a boolean (true/false, on/off) nor auto", o->name, v);
        return -1;
    case T_BOOL:
        if (!strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) {
            *(int *)field = 1;
        } else if (!strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) {
            *(int *)field = 0;
        } else {
            snprintf(err, errlen, "--%s: '%s' is not a boolean (true/false)", o->name, v);
            return -1;
        }
        return 0;
    case T_CHOICE: {
        const char *p = o->choices;
        size_t vl = strlen(v);
        int ok = 0;
        while (p && *p) {
            const char *bar = strchr(p, '|');
            size_t l = bar ? (size_t)(bar - p) : strlen(p);
            if (l == vl && strncmp(p, v, l) == 0) { ok = 1; break; }
            p = bar ? bar + 1 : NULL;
        }
        if (!ok) {
            snprintf(err, errlen, "--%s: '%s' is not one of %s", o->name, v, o->choices);
            return -1;
        }
    }   /* fall through */
    case T_STR: {
        char **s = field;
        free(*s);
        *s = strdup(v);
        CHECK(*s != NULL);
        return 0;
    }
    }
    return -1;
}

void config_init(Config *c) {
    memset(c, 0, sizeof *c);
    char err[512];
    for (size_t i = 0; i < k_nopts; i++)
        if (parse_value(c, &k_opts[i], k_opts[i].def, err, sizeof err) != 0)
            fail_at(__FILE__, __LINE__, "bad default in config_table.h", err);
}

int config_set(Config *c, const char *name, const char *value, char *err, size_t errlen) {
    const OptDesc *o = find_opt(name, strlen(name));
    if (!o) {
        snprintf(err, errlen, "unknown option --%s (see --help)", name);
        return -1;
    }
    return parse_value(c, o, value, err, errlen);
}

void config_print_help(FILE *out, const char *progname) {
    fprintf(out, "usage: %s [--option VALUE | --option=VALUE | --flag | --no-flag] ...\n\n", progname);
    fprintf(out, "Trains a convolutional network (--model: MiniResNet, torchvision's ResNets, or a network file) data-parallel on a sharded HDF5 dataset. Options (default in brackets):\n");
    for (size_t i = 0; i < k_nopts; i++) {
        const OptDesc *o = &k_opts[i];
        char lhs[96];
        switch (o->type) {
        case T_BOOL: snprintf(lhs, sizeof lhs, "--%s, --no-%s", o->name, o->name); break;
        case T_SWITCH: snprintf(lhs, sizeof lhs, "--%s, --no-%s, --%s={auto|on|off}", o->name, o->name, o->name); break;
        case T_INT: snprintf(lhs, sizeof lhs, "--%s N", o->name); break;
        case T_FLOAT: snprintf(lhs, sizeof lhs, "--%s X", o->name); break;
        case T_CHOICE: snprintf(lhs, sizeof lhs, "--%s {%s}", o->name, o->choices); break;
        case T_STR: snprintf(lhs, sizeof lhs, "--%s S", o->name); break;
        }
        fprintf(out, "  %-36s %s [%s]\n", lhs, o->help, *o->def ? o->def : "\"\"");
    }
    fprintf(out, "  %-36s %s\n", "--help", "print this and exit");
    fprintf(out, "  %-36s %s\n", "--version", "print the version and exit");
    fprintf(out, "\nExit status: 0 finished, 1 error (one line on stderr), 2 bad flag or value,\n"
                 "3 stopped by SIGTERM or --preempt_signal after writing a checkpoint.\n");
}

/* The FILE of the last --config FILE or --config=FILE in argv, read the way config_parse reads
 * argv (a value taken by another option is not a flag), or NULL; NULL too when --help or
 * --version asks for no run. Errors are left to config_parse's own pass. */
static const char *config_file_arg(int argc, char **argv) {
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "--version")) return NULL;
        if (strncmp(a, "--", 2) != 0) continue;
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        const OptDesc *o = find_opt(name, eq ? (size_t)(eq - name) : strlen(name));
        if (!o || o->type == T_BOOL || o->type == T_SWITCH) continue;
        const char *value = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (value && !strcmp(o->name, "config")) file = value;
    }
    return file;
}

/* The JSON kind an option's value must have in a --config file. */
static JsonKind json_kind_of(OptType t) {
    switch (t) {
    case T_INT: case T_FLOAT: return JSON_FLAT_NUMBER;
    case T_BOOL: return JSON_FLAT_BOOL;
    case T_STR: case T_CHOICE: case T_SWITCH: break;
    }
    return JSON_FLAT_STRING;
}

/* json_flat_read's callback for a --config file: ctx is the Config. The key must name an
 * option, its value be of the option's kind and pass as the command line's would. */
static int config_json_pair(void *ctx, const char *key, JsonKind kind, const char *value, size_t line,
                            size_t column, char *err, size_t errlen) {
    (void)line;
    (void)column;
    const OptDesc *o = find_opt(key, strlen(key));
    if (!o) return errf(err, errlen, "unknown key \"%.100s\" (not an option of this ddptrain; see --help)", key);
    /* a SWITCH takes true and false as well as its strings */
    if (json_kind_of(o->type) != kind && !(o->type == T_SWITCH && kind == JSON_FLAT_BOOL))
        return errf(err, errlen, "key \"%s\": the value must be %s, not %s", key, json_kind_name(json_kind_of(o->type)),
                    json_kind_name(kind));
    char e[600];
    if (parse_value(ctx, o, value, e, sizeof e) != 0) return errf(err, errlen, "key \"%s\": %s", key, e);
    return 0;
}

int config_json_apply(Config *c, const char *text, size_t len, const char *what, char *err, size_t errlen) {
    return json_flat_read(text, len, what, config_json_pair, c, err, errlen);
}

int config_file_apply(Config *c, const char *path, char *err, size_t errlen) {
    return json_flat_read_file(path, config_json_pair, c, err, errlen);
}

int config_parse(Config *c, int argc, char **argv, char *err, size_t errlen) {
    /* The file first, wherever --config stands, so that every flag overrides it */
    const char *file = config_file_arg(argc, argv);
    if (file && *file && config_file_apply(c, file, err, errlen) != 0) return -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return CONFIG_HELP;
        if (!strcmp(a, "--version")) return CONFIG_VERSION;
        if (strncmp(a, "--", 2) != 0)
            return errf(err, errlen, "unexpected argument '%s' (options are --name VALUE; see --help)", a);
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const OptDesc *o = find_opt(name, nlen);
        if (!o && !eq && strncmp(name, "no-", 3) == 0) {
            const OptDesc *b = find_opt(name + 3, nlen - 3);
            if (b && (b->type == T_BOOL || b->type == T_SWITCH)) {
                *(int *)((char *)c + b->offset) = 0;
                continue;
            }
        }
        if (!o) return errf(err, errlen, "unknown option --%.*s (see --help)", (int)nlen, name);
        const char *value;
        if (eq) {
            value = eq + 1;
        } else if (o->type == T_BOOL || o->type == T_SWITCH) {
            value = "true";
        } else {
            if (i + 1 >= argc) return errf(err, errlen, "--%s: missing value", o->name);
            value = argv[++i];
        }
        if (parse_value(c, o, value, err, errlen) != 0) return -1;
    }
    return 0;
}

int config_parse_args(Config *c, int argc, char **argv) {
    char err[600];
    switch (config_parse(c, argc, argv, err, sizeof err)) {
    case 0: return 0;
    case CONFIG_HELP:
        config_print_help(stdout, g_progname);
        exit(0);
    case CONFIG_VERSION: return CONFIG_VERSION;
    default: die_code(2, "%s", err);
    }
}

int config_lr_milestones(const Config *c, long *out, int max) {
    const char *s = c->lr_milestones;
    int n = 0;
    if (!*s) return 0;
    for (;;) {
        char *end;
        errno = 0;
        const long v = strtol(s, &end, 10);
        if (end == s || errno || v < 1 || n >= max || (n > 0 && v <= out[n - 1])) return -1;
        out[n++] = v;
        if (*end == '\0') return n;
        if (*end != ',') return -1;
        s = end + 1;
    }
}

int config_rrc_scale(const Config *c, double *lo, double *hi) {
    const char *s = c->rrc_scale;
    char *end;
    errno = 0;
    *lo = strtod(s, &end);
    if (end == s || *end != ',' || errno) return -1;
    s = end + 1;
    *hi = strtod(s, &end);
    if (end == s || *end != '\0' || errno) return -1;
    return *lo > 0.0 && *lo <= *hi && *hi <= 1.0 ? 0 : -1;   /* false for NaN too */
}

int config_color_jitter(const Config *c, double j[4]) {
    j[0] = j[1] = j[2] = j[3] = 0.0;
    const char *s = c->color_jitter;
    if (!*s) return 0;
    for (int i = 0; i < 4; i++) {
        char *end;
        errno = 0;
        j[i] = strtod(s, &end);
        if (end == s || errno || !(j[i] >= 0.0 && j[i] < 1e6) || *end != (i < 3 ? ',' : '\0')) return -1;
        s = end + 1;
    }
    return j[3] <= 0.5 ? 0 : -1;
}

long config_input_size(const Config *c) { return c->train_crop_size ? c->train_crop_size : c->image_size; }

long config_eval_size(const Config *c) { return c->val_crop_size ? c->val_crop_size : config_input_size(c); }

static long progressive_end(const Config *c) { return c->progressive_end_epoch ? c->progressive_end_epoch : c->epochs; }

long config_train_crop_at(const Config *c, long epoch) {
    const long lo = c->progressive_min_crop, hi = config_input_size(c);
    if (!lo) return hi;
    const long e = epoch + 1, start = c->progressive_start_epoch, end = progressive_end(c);
    if (e <= start) return lo;
    if (e >= end) return hi;
    /* FFCV's get_resolution: np.interp, then np.round(res / step) * step (ties to even) */
    const double v = (double)lo + (double)(hi - lo) * (double)(e - start) / (double)(end - start);
    long size = (long)nearbyint(v / (double)c->progressive_step) * c->progressive_step;
    return size < lo ? lo : size > hi ? hi : size;
}

int config_check_recipe(const Config *c, char *err, size_t errlen) {
    if (c->straggler_factor > 0.0 && c->straggler_factor <= 1.0)
        return errf(err, errlen, "--straggler_factor %g: must be 0 (off) or above 1", c->straggler_factor);
    if (c->nesterov && c->momentum == 0.0)
        return errf(err, errlen,
                    "--nesterov: needs a nonzero --momentum (torch.optim.SGD refuses nesterov without momentum)");
    if (c->nesterov && strcmp(c->optimizer, "sgd") != 0 && strcmp(c->optimizer, "lars") != 0)
        return errf(err, errlen, "--nesterov: --optimizer %s has no Nesterov momentum (sgd and lars have)", c->optimizer);
    const int adam = !strcmp(c->optimizer, "adamw") || !strcmp(c->optimizer, "lamb");
    if (adam && (c->adam_beta1 >= 1.0 || c->adam_beta2 >= 1.0))
        return errf(err, errlen, "--adam_beta%d %g: must be below 1 (--optimizer %s)", c->adam_beta1 >= 1.0 ? 1 : 2,
                    c->adam_beta1 >= 1.0 ? c->adam_beta1 : c->adam_beta2, c->optimizer);
    if (c->ema_decay >= 1.0) return errf(err, errlen, "--ema_decay %g: must be below 1 (0: off)", c->ema_decay);
    if (c->label_smoothing >= 1.0)
        return errf(err, errlen, "--label_smoothing %g: must be below 1", c->label_smoothing);
    double jit[4];
    if (config_color_jitter(c, jit) != 0)
        return errf(err, errlen, "--color_jitter %s: must be B,C,S,H, four numbers >= 0 with H at most 0.5 (ColorJitter's "
                    "brightness, contrast, saturation, hue)", c->color_jitter);
    const int jitter = jit[0] > 0 || jit[1] > 0 || jit[2] > 0 || jit[3] > 0;
    if (!c->augment && (strcmp(c->auto_augment, "none") != 0 || jitter))
        return errf(err, errlen, "--%s: needs --augment (the pixel augmentations follow its crop and flip)",
                    strcmp(c->auto_augment, "none") != 0 ? "auto_augment" : "color_jitter");
    double lo, hi;
    if (config_rrc_scale(c, &lo, &hi) != 0)
        return errf(err, errlen, "--rrc_scale %s: must be LO,HI with 0 < LO <= HI <= 1 (RandomResizedCrop's scale)",
                    c->rrc_scale);
    if (c->train_crop_size > c->image_size)
        return errf(err, errlen,
                    "--train_crop_size %ld: larger than the stored images (--image_size %ld); import them at a size "
                    "of at least the crop (ddptrain-data import --size)", c->train_crop_size, c->image_size);
    if (!c->train_crop_size && (c->val_resize_size || c->val_crop_size))
        return errf(err, errlen, "--%s: needs --train_crop_size (without it images are used at their stored size)",
                    c->val_resize_size ? "val_resize_size" : "val_crop_size");
    if (c->val_crop_size > c->image_size)
        return errf(err, errlen,
                    "--val_crop_size %ld: larger than the stored images (--image_size %ld); import them at a size of "
                    "at least the crop (ddptrain-data import --size)", c->val_crop_size, c->image_size);
    if (c->progressive_min_crop && !c->train_crop_size)
        return errf(err, errlen, "--progressive_min_crop: needs --train_crop_size (the size the crops rise to)");
    if (c->progressive_min_crop >= c->train_crop_size && c->progressive_min_crop)
        return errf(err, errlen, "--progressive_min_crop %ld: must be below --train_crop_size %ld (the size it rises to)",
                    c->progressive_min_crop, c->train_crop_size);
    if (c->progressive_min_crop && c->progressive_start_epoch >= progressive_end(c))
        return errf(err, errlen, "--progressive_start_epoch %ld: must be before --progressive_end_epoch (%ld)",
                    c->progressive_start_epoch, progressive_end(c));
    const long eval = config_eval_size(c);
    if (c->val_resize_size && c->val_resize_size < eval)
        return errf(err, errlen, "--val_resize_size %ld: smaller than the centre crop (%ld) taken from it",
                    c->val_resize_size, eval);
    if (c->lookahead_every > 0 && c->ema_decay > 0.0)
        return errf(err, errlen, "--lookahead_every: not with --ema_decay (the checkpoints' /ema holds Lookahead's slow "
                    "weights)");
    const int onecycle = !strcmp(c->lr_schedule, "onecycle") || !strcmp(c->lr_schedule, "triangle");
    if (onecycle && c->warmup_steps > 0)
        return errf(err, errlen, "--warmup_steps: --lr_schedule %s warms up by itself (--onecycle_pct_start)",
                    c->lr_schedule);
    if (c->lr_warmup_epochs > 0 && (onecycle || !strcmp(c->lr_schedule, "cosine_step")))
        return errf(err, errlen, "--lr_warmup_epochs: --lr_schedule %s steps per optimizer step, not per epoch (%s)",
                    c->lr_schedule, onecycle ? "it warms up by itself, --onecycle_pct_start" : "use --warmup_steps");
    if (c->lr_warmup_epochs > 0 && c->warmup_steps > 0)
        return errf(err, errlen, "--lr_warmup_epochs: one warm-up at a time (--warmup_steps %ld is given)", c->warmup_steps);
    if (c->lr_warmup_epochs > 0 && c->lr_warmup_epochs >= c->epochs)
        return errf(err, errlen, "--lr_warmup_epochs %ld: must be below --epochs %ld (the schedule after it needs an epoch)",
                    c->lr_warmup_epochs, c->epochs);
    long ms[64];
    const int n_ms = config_lr_milestones(c, ms, 32);
    if (n_ms < 0)
        return errf(err, errlen, "--lr_milestones '%s': must be up to 32 positive epochs, ascending, comma-separated",
                    c->lr_milestones);
    if (!strcmp(c->lr_schedule, "multistep") && n_ms == 0)
        return errf(err, errlen, "--lr_schedule multistep: needs --lr_milestones (the epochs where --lr_gamma applies)");
    if (onecycle && c->min_lr != 0.0)
        return errf(err, errlen,
                    "--min_lr: --lr_schedule %s ends at --lr / --onecycle_div_factor / --onecycle_final_div_factor",
                    c->lr_schedule);
    return 0;
}

/* JSON string escaping for the few characters a path or name can carry. A byte that is no
 * part of valid UTF-8 (a path from a Latin-1 file system) is written \udcXX, the lone
 * surrogate Python's surrogateescape decodes it to (os.fsencode gives the byte back), so that
 * config.json is always valid JSON text; config_file.c reads it back as that byte. */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    while (*s) {
        unsigned char ch = (unsigned char)*s;
        int len = utf8_seq_len(s);
        if (len == 0) fprintf(f, "\\u%04x", 0xdc00u | ch);
        else if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fwrite(s, 1, (size_t)len, f);
        s += len ? len : 1;
    }
    fputc('"', f);
}

char *config_to_json(const Config *c) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    fputs("{", f);
    for (size_t i = 0; i < k_nopts; i++) {
        const OptDesc *o = &k_opts[i];
        const void *field = (const char *)c + o->offset;
        fprintf(f, "%s\n  ", i ? "," : "");
        json_str(f, o->name);
        fputs(": ", f);
        switch (o->type) {
        case T_INT: fprintf(f, "%ld", *(const long *)field); break;
        case T_FLOAT: fprintf(f, "%.17g", *(const double *)field); break;
        case T_BOOL: fputs(*(const int *)field ? "true" : "false", f); break;
        /* on and off as the booleans older readers expect */
        case T_SWITCH: fputs(*(const int *)field == CONFIG_AUTO ? "\"auto\"" : *(const int *)field ? "true" : "false", f); break;
        case T_STR: case T_CHOICE: json_str(f, *(char *const *)field); break;
        }
    }
    fputs("\n}\n", f);
    CHECK(fclose(f) == 0);
    return buf;
}

void config_free(Config *c) {
    for (size_t i = 0; i < k_nopts; i++) {
        if (k_opts[i].type == T_STR || k_opts[i].type == T_CHOICE) {
            char **s = (char **)((char *)c + k_opts[i].offset);
            free(*s);
            *s = NULL;
        }
    }
}
