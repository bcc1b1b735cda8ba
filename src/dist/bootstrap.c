/* SPDX-License-Identifier: BSD-3-Clause */
/* bootstrap.c - see bootstrap.h. */
#include "build_config.h"
#include "bootstrap.h"
#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_PMIX
#include <pmix.h>

/* A failing PMIx call after PMIx_Init means the launcher's server broke or a peer died:
 * not recoverable, so name the call and the library's reason and stop. */
static void pmix_fail(const char *file, int line, const char *call, pmix_status_t rc) {
    char d[256];
    snprintf(d, sizeof d, "%s (status %d)", PMIx_Error_string(rc), (int)rc);
    fail_at(file, line, call, d);
}
#define PMIX_CHECK(call) do { pmix_status_t rc_ = (call); \
    if (rc_ != PMIX_SUCCESS) pmix_fail(__FILE__, __LINE__, #call, rc_); } while (0)

/* Fence timeout: a fence waits for every rank, so a dead peer would otherwise hang it. */
#define BOOTSTRAP_FENCE_TIMEOUT_S 300
#endif

/* ---- strict environment parsing ------------------------------------------------------------ */

/* Where the variables come from: the process environment, or a caller's (bootstrap_from_env). */
typedef struct {
    BootstrapEnvFn get;
    void *ctx;
} Env;

static const char *env_get(const Env *e, const char *name) { return e->get(e->ctx, name); }

static const char *process_env(void *ctx, const char *name) {
    (void)ctx;
    return getenv(name);
}

/* 1: *out set; 0: unset or empty; -1: present but not a non-negative int (err written). */
static int env_int(const Env *e, const char *name, int *out, char *err, size_t errlen) {
    const char *s = env_get(e, name);
    if (!s || !*s) return 0;
    const char *p = s;
    while (isspace((unsigned char)*p)) p++;
    errno = 0;
    char *end;
    long v = strtol(p, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    if (!isdigit((unsigned char)*p) || *end || errno || v < 0 || v > INT_MAX) {
        snprintf(err, errlen, "environment variable %s='%s' is not a non-negative integer", name, s);
        return -1;
    }
    *out = (int)v;
    return 1;
}

/* First of the names that is set; -1 on a malformed value. Which one was used goes to *used. */
static int env_int_any(const Env *e, const char *const *names, int *out, const char **used, char *err, size_t errlen) {
    for (; *names; names++) {
        int r = env_int(e, *names, out, err, errlen);
        if (r != 0) { if (used) *used = *names; return r; }
    }
    return 0;
}

/* Slurm's compressed tasks-per-node list "2(x3),1": the count of node `node`; -1 if malformed
 * or too short. */
static int slurm_tasks_on_node(const char *list, int node) {
    const char *p = list;
    long idx = 0;
    while (*p) {
        char *end;
        long n = strtol(p, &end, 10);
        if (end == p || n <= 0) return -1;
        long rep = 1;
        p = end;
        if (*p == '(') {
            if (p[1] != 'x') return -1;
            rep = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || rep <= 0) return -1;
            p = end + 1;
        }
        if (n > INT_MAX || rep > INT_MAX) return -1;
        if (node < idx + rep) return (int)n;
        idx += rep;
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    return -1;
}

static int check_ranges(Bootstrap *b, const char *rank_var, const char *size_var,
                        const char *lrank_var, const char *lsize_var, char *err, size_t errlen) {
    if (b->world_size < 1) {
        snprintf(err, errlen, "%s=%d: the job size must be at least 1", size_var, b->world_size);
        return -1;
    }
    if (b->rank >= b->world_size) {
        snprintf(err, errlen, "%s=%d is not below %s=%d", rank_var, b->rank, size_var, b->world_size);
        return -1;
    }
    if (b->local_size < 1 || b->local_size > b->world_size) {
        snprintf(err, errlen, "%s=%d is not between 1 and %s=%d", lsize_var, b->local_size,
                 size_var, b->world_size);
        return -1;
    }
    if (b->local_rank >= b->local_size) {
        snprintf(err, errlen, "%s=%d is not below %s=%d", lrank_var, b->local_rank, lsize_var,
                 b->local_size);
        return -1;
    }
    if (b->num_nodes < 1 || b->num_nodes > b->world_size) {
        snprintf(err, errlen, "node count %d is not between 1 and %s=%d", b->num_nodes, size_var,
                 b->world_size);
        return -1;
    }
    return 0;
}

/* ---- methods ------------------------------------------------------------------------------- */

#ifdef HAVE_PMIX
static long long pmix_value_int(const pmix_value_t *v) {
    switch (v->type) {
    case PMIX_UINT8: return v->data.uint8;
    case PMIX_UINT16: return v->data.uint16;
    case PMIX_UINT32: return v->data.uint32;
    case PMIX_UINT64: return (long long)v->data.uint64;
    case PMIX_INT: return v->data.integer;
    case PMIX_INT8: return v->data.int8;
    case PMIX_INT16: return v->data.int16;
    case PMIX_INT32: return v->data.int32;
    case PMIX_INT64: return v->data.int64;
    case PMIX_UINT: return v->data.uint;
    case PMIX_PROC_RANK: return v->data.rank;
    case PMIX_SIZE: return (long long)v->data.size;
    default: return -1;
    }
}

/* An integer job/node attribute; `fallback` when the server does not provide it (not every
 * launcher publishes PMIX_NUM_NODES or PMIX_LOCAL_SIZE). */
static int pmix_get_int(const pmix_proc_t *proc, const char *key, int fallback) {
    pmix_value_t *val = NULL;
    if (PMIx_Get(proc, key, NULL, 0, &val) != PMIX_SUCCESS || !val) return fallback;
    long long v = pmix_value_int(val);
    PMIX_VALUE_RELEASE(val);
    return (v < 0 || v > INT_MAX) ? fallback : (int)v;
}

/* 1: PMIx answered and *b is filled; 0: no PMIx server (not an error by itself). */
static int try_pmix(Bootstrap *b, int *init_status) {
    pmix_proc_t me, wild;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    *init_status = rc;
    if (rc != PMIX_SUCCESS) return 0;
    b->pmix_active = 1;
    snprintf(b->pmix_nspace, sizeof b->pmix_nspace, "%s", me.nspace);
    b->pmix_rank = me.rank;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    b->rank = (int)me.rank;
    b->world_size = pmix_get_int(&wild, PMIX_JOB_SIZE, -1);
    if (b->world_size < 0) b->world_size = pmix_get_int(&wild, PMIX_UNIV_SIZE, 1);
    b->local_rank = pmix_get_int(&me, PMIX_LOCAL_RANK, 0);
    b->local_size = pmix_get_int(&wild, PMIX_LOCAL_SIZE, -1);
    if (b->local_size < 0) b->local_size = pmix_get_int(&me, PMIX_LOCAL_SIZE, b->world_size);
    b->num_nodes = pmix_get_int(&wild, PMIX_NUM_NODES, 1);
    b->method = "pmix";
    return 1;
}
#endif

/* OMPI_COMM_WORLD_* is set by Open MPI's mpirun for every process it starts; it is the way to
 * learn the rank under mpirun in a build without PMIx. */
static int try_ompi_env(Bootstrap *b, const Env *e, char *err, size_t errlen) {
    int size, r;
    if ((r = env_int(e, "OMPI_COMM_WORLD_SIZE", &size, err, errlen)) <= 0) return r;
    b->world_size = size;
    b->rank = b->local_rank = 0;
    b->local_size = 1;
    b->num_nodes = 1;
    if (env_int(e, "OMPI_COMM_WORLD_RANK", &b->rank, err, errlen) < 0) return -1;
    if (env_int(e, "OMPI_COMM_WORLD_LOCAL_RANK", &b->local_rank, err, errlen) < 0) return -1;
    b->local_size = size;
    if (env_int(e, "OMPI_COMM_WORLD_LOCAL_SIZE", &b->local_size, err, errlen) < 0) return -1;
    if (size < 1) {
        snprintf(err, errlen, "OMPI_COMM_WORLD_SIZE=%d: the job size must be at least 1", size);
        return -1;
    }
    if (b->local_size < 1) {   /* before it divides */
        snprintf(err, errlen, "OMPI_COMM_WORLD_LOCAL_SIZE=%d is not between 1 and OMPI_COMM_WORLD_SIZE=%d", b->local_size, size);
        return -1;
    }
    b->num_nodes = (int)(((long)size + b->local_size - 1) / b->local_size);   /* not published; estimate */
    b->method = "ompi-env";
    if (check_ranges(b, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                     "OMPI_COMM_WORLD_LOCAL_SIZE", err, errlen) != 0)
        return -1;
    return 1;
}

/* Inside a Slurm job? Returns 1 and fills *b, 0 when not in Slurm, -1 on error. `pmix_status`
 * describes why PMIx was not usable (for the error message). */
static int try_slurm(Bootstrap *b, const Env *e, const char *pmix_status, char *err, size_t errlen) {
    static const char *const size_vars[] = {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS", NULL};
    static const char *const node_vars[] = {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", NULL};
    int procid, r;
    if ((r = env_int(e, "SLURM_PROCID", &procid, err, errlen)) <= 0) return r;
    const char *size_var = "SLURM_NTASKS";
    int size = 1;
    if (env_int_any(e, size_vars, &size, &size_var, err, errlen) < 0) return -1;
    /* SLURM_STEP_NUM_TASKS is set only inside an srun step; without it we are the batch
     * script itself, which is one process however many tasks the job has. */
    int in_step = env_get(e, "SLURM_STEP_NUM_TASKS") != NULL;
    if (size > 1) {
        const char *mpi_type = env_get(e, "SLURM_MPI_TYPE");
        int pmix_launched = env_get(e, "PMIX_RANK") != NULL || (mpi_type && strncmp(mpi_type, "pmix", 4) == 0);
#ifndef HAVE_MPI
        snprintf(err, errlen, "this Slurm job step has %d tasks (%s=%d) but ddptrain was built "
                 "without MPI, so its ranks cannot communicate: rebuild with MPI (configure "
                 "--with-mpi) or run one task", size, size_var, size);
        return -1;
#endif
        if (!in_step) {
            snprintf(err, errlen, "started directly in the batch script of a %d-task Slurm job "
                     "(SLURM_NTASKS=%d): launch it with `srun --mpi=pmix ddptrain ...` so that "
                     "every task runs and the ranks are connected", size, size);
            return -1;
        }
#ifdef HAVE_PMIX
        (void)pmix_launched;
        snprintf(err, errlen, "this Slurm job step has %d tasks (%s=%d) but no PMIx server "
                 "answered (PMIx_Init: %s), so the ranks could not be connected and each would "
                 "train alone: did you mean srun --mpi=pmix?", size, size_var, size, pmix_status);
        return -1;
#else
        /* Built without PMIx: Open MPI still connects the ranks itself through Slurm's PMIx
         * server, which exists only when the step was started with a PMIx plugin. */
        if (!pmix_launched) {
            snprintf(err, errlen, "this Slurm job step has %d tasks (%s=%d) but was not started "
                     "with a PMIx plugin (SLURM_MPI_TYPE=%s), so the ranks cannot be connected: "
                     "did you mean srun --mpi=pmix?", size, size_var, size,
                     mpi_type ? mpi_type : "(unset)");
            return -1;
        }
#endif
    }
    (void)pmix_status;
    b->rank = procid;
    b->world_size = size;
    b->local_rank = 0;
    if (env_int(e, "SLURM_LOCALID", &b->local_rank, err, errlen) < 0) return -1;
    b->num_nodes = 1;
    if (env_int_any(e, node_vars, &b->num_nodes, NULL, err, errlen) < 0) return -1;
    int node = 0;
    if (env_int(e, "SLURM_NODEID", &node, err, errlen) < 0) return -1;
    b->local_size = -1;
    const char *tpn_var = in_step ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
    const char *tpn = env_get(e, tpn_var);
    if (tpn && *tpn) {
        b->local_size = slurm_tasks_on_node(tpn, node);
        if (b->local_size < 0) {
            snprintf(err, errlen, "environment variable %s='%s' has no entry for node %d "
                     "(SLURM_NODEID)", tpn_var, tpn, node);
            return -1;
        }
    } else if (env_int(e, "SLURM_NTASKS_PER_NODE", &b->local_size, err, errlen) < 0) {
        return -1;
    }
    if (b->num_nodes < 1) {   /* before it divides */
        snprintf(err, errlen, "node count %d (SLURM_STEP_NUM_NODES or SLURM_NNODES) is not at least 1", b->num_nodes);
        return -1;
    }
    if (b->local_size < 0) b->local_size = (int)(((long)size + b->num_nodes - 1) / b->num_nodes);
    if (size == 1) b->num_nodes = 1;   /* a 1-task step inside a bigger allocation */
    b->method = "slurm";
    return check_ranges(b, "SLURM_PROCID", size_var, "SLURM_LOCALID", tpn_var, err, errlen) ? -1 : 1;
}

static int try_torchrun(Bootstrap *b, const Env *e, char *err, size_t errlen) {
    static const char *const nnodes_vars[] = {"NNODES", "GROUP_WORLD_SIZE", NULL};
    int size, r;
    if ((r = env_int(e, "WORLD_SIZE", &size, err, errlen)) < 0) return -1;
    if (r == 0) {
        if (env_get(e, "RANK")) {
            snprintf(err, errlen, "RANK is set but WORLD_SIZE is not: set both (torchrun-style launch)");
            return -1;
        }
        return 0;
    }
    if ((r = env_int(e, "RANK", &b->rank, err, errlen)) < 0) return -1;
    if (r == 0) {
        if (size != 1) {
            snprintf(err, errlen, "WORLD_SIZE=%d is set but RANK is not: set both (torchrun-style launch)", size);
            return -1;
        }
        b->rank = 0;
    }
    b->world_size = size;
    b->local_rank = b->rank;
    if (env_int(e, "LOCAL_RANK", &b->local_rank, err, errlen) < 0) return -1;
    b->local_size = size;
    if (env_int(e, "LOCAL_WORLD_SIZE", &b->local_size, err, errlen) < 0) return -1;
    b->num_nodes = 0;
    if (env_int_any(e, nnodes_vars, &b->num_nodes, NULL, err, errlen) < 0) return -1;
    if (b->num_nodes == 0 && b->local_size > 0) b->num_nodes = (int)(((long)size + b->local_size - 1) / b->local_size);
    int group = 0;
    if (env_int(e, "GROUP_RANK", &group, err, errlen) < 0) return -1;
    if (group >= b->num_nodes && b->num_nodes > 0) {
        snprintf(err, errlen, "GROUP_RANK=%d is not below the node count %d", group, b->num_nodes);
        return -1;
    }
    if (check_ranges(b, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", err, errlen) != 0) return -1;
#ifndef HAVE_MPI
    if (size > 1) {
        snprintf(err, errlen, "WORLD_SIZE=%d but ddptrain was built without MPI, so its ranks "
                 "cannot communicate", size);
        return -1;
    }
#endif
    b->method = "torchrun";
    return 1;
}

static int from_env(Bootstrap *b, const Env *e, const char *pmix_status, char *err, size_t errlen);

int bootstrap_init(Bootstrap *b, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    if (gethostname(b->hostname, sizeof b->hostname) != 0) snprintf(b->hostname, sizeof b->hostname, "?");
    b->hostname[sizeof b->hostname - 1] = '\0';
    char pmix_status[128] = "ddptrain was built without PMIx";
#ifdef HAVE_PMIX
    int st = 0;
    if (try_pmix(b, &st)) {
        if (check_ranges(b, "PMIx rank", "PMIX_JOB_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE", err, errlen) != 0) {
            bootstrap_free(b);
            return -1;
        }
        return 0;
    }
    snprintf(pmix_status, sizeof pmix_status, "%s", PMIx_Error_string(st));
#endif
    return from_env(b, &(Env){process_env, NULL}, pmix_status, err, errlen);
}

/* Methods 2 to 5 (bootstrap.h), reading the variables through e. */
static int from_env(Bootstrap *b, const Env *e, const char *pmix_status, char *err, size_t errlen) {
    int r;
    if ((r = try_ompi_env(b, e, err, errlen)) != 0) return r > 0 ? 0 : -1;
    if ((r = try_slurm(b, e, pmix_status, err, errlen)) != 0) return r > 0 ? 0 : -1;
    if ((r = try_torchrun(b, e, err, errlen)) != 0) return r > 0 ? 0 : -1;
    b->rank = b->local_rank = 0;
    b->world_size = b->local_size = b->num_nodes = 1;
    b->method = "single";
    return 0;
}

int bootstrap_from_env(Bootstrap *b, BootstrapEnvFn get, void *ctx, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    snprintf(b->hostname, sizeof b->hostname, "?");
    return from_env(b, &(Env){get, ctx}, "not tried", err, errlen);
}

/* ---- the Slurm job directory --------------------------------------------------------------- */

int bootstrap_default_job_dir(BootstrapEnvFn get, void *ctx, char *dir, size_t n, char *err, size_t errlen) {
    const Env env = {get ? get : process_env, ctx}, *e = &env;
    const char *job = env_get(e, "SLURM_JOB_ID"), *submit = env_get(e, "SLURM_SUBMIT_DIR");
    if (!job || !*job) return 0;
    /* Both become a path that checkpoints are written under and read back from: a job id
     * "../x" or a relative or odd submit directory would put them somewhere else. */
    size_t jl = strlen(job);
    if (jl > 20 || strspn(job, "0123456789") != jl)
        return errf(err, errlen, "environment variable SLURM_JOB_ID='%.40s' is not a job number "
                    "(pass --job_dir to choose the job directory)", job);
    if (submit && *submit) {
        int bad = submit[0] != '/' || strlen(submit) > 3000 || strstr(submit, "/../") ||
                  (strlen(submit) >= 3 && !strcmp(submit + strlen(submit) - 3, "/.."));
        for (const unsigned char *p = (const unsigned char *)submit; !bad && *p; p++) bad = *p < 0x20 || *p == 0x7f;
        if (bad)
            return errf(err, errlen, "environment variable SLURM_SUBMIT_DIR='%.60s' is not an absolute path "
                        "without '..' or control characters (pass --job_dir to choose the job directory)", submit);
    }
    if (snprintf(dir, n, "%s/runs/%s", submit && *submit ? submit : ".", job) >= (int)n)
        return errf(err, errlen, "SLURM_SUBMIT_DIR: too long for a job directory");
    return 1;
}

const char *bootstrap_describe(Bootstrap *b) {
    snprintf(b->desc, sizeof b->desc, "bootstrap: %s, rank %d/%d, local %d/%d, %d node%s, host %s",
             b->method, b->rank, b->world_size, b->local_rank, b->local_size, b->num_nodes,
             b->num_nodes == 1 ? "" : "s", b->hostname);
    return b->desc;
}

/* ---- key-value exchange -------------------------------------------------------------------- */

int bootstrap_has_kv(const Bootstrap *b) { return b->pmix_active; }

#ifdef HAVE_PMIX
static void check_key(const char *key) {
    if (!key || !*key || strlen(key) > PMIX_MAX_KEYLEN) fail_at(__FILE__, __LINE__, "invalid key", key);
}
#endif

int bootstrap_put(Bootstrap *b, const char *key, const void *data, size_t len) {
#ifdef HAVE_PMIX
    if (!b->pmix_active) return -1;
    check_key(key);
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)data;   /* PMIx_Put copies it */
    v.data.bo.size = len;
    PMIX_CHECK(PMIx_Put(PMIX_GLOBAL, key, &v));
    return 0;
#else
    (void)b; (void)key; (void)data; (void)len;
    return -1;
#endif
}

int bootstrap_commit_fence(Bootstrap *b) {
#ifdef HAVE_PMIX
    if (!b->pmix_active) return -1;
    pmix_proc_t wild;
    pmix_info_t info[2];
    bool collect = true;
    int timeout = BOOTSTRAP_FENCE_TIMEOUT_S;
    PMIX_CHECK(PMIx_Commit());
    PMIX_LOAD_PROCID(&wild, b->pmix_nspace, PMIX_RANK_WILDCARD);
    /* COLLECT_DATA: every rank receives all committed keys at the fence, so the gets after it
     * are local lookups instead of one server round trip per peer. */
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
    pmix_status_t rc = PMIx_Fence(&wild, 1, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    PMIX_CHECK(rc);
    return 0;
#else
    (void)b;
    return -1;
#endif
}

int bootstrap_get(Bootstrap *b, int peer_rank, const char *key, void *data, size_t len) {
#ifdef HAVE_PMIX
    if (!b->pmix_active) return -1;
    check_key(key);
    if (peer_rank < 0 || peer_rank >= b->world_size) fail_at(__FILE__, __LINE__, "peer rank out of range", key);
    pmix_proc_t peer;
    pmix_value_t *val = NULL;
    PMIX_LOAD_PROCID(&peer, b->pmix_nspace, (pmix_rank_t)peer_rank);
    PMIX_CHECK(PMIx_Get(&peer, key, NULL, 0, &val));
    if (!val || val->type != PMIX_BYTE_OBJECT || val->data.bo.size != len) {
        char d[160];
        snprintf(d, sizeof d, "key '%s' of rank %d: expected %zu bytes, got %zu (type %d)", key,
                 peer_rank, len, val && val->type == PMIX_BYTE_OBJECT ? val->data.bo.size : 0,
                 val ? (int)val->type : -1);
        fail_at(__FILE__, __LINE__, "bootstrap_get", d);
    }
    memcpy(data, val->data.bo.bytes, len);
    PMIX_VALUE_RELEASE(val);
    return 0;
#else
    (void)b; (void)peer_rank; (void)key; (void)data; (void)len;
    return -1;
#endif
}

void bootstrap_free(Bootstrap *b) {
#ifdef HAVE_PMIX
    if (b->pmix_active) {
        b->pmix_active = 0;
        pmix_status_t rc = PMIx_Finalize(NULL, 0);
        if (rc != PMIX_SUCCESS)
            fprintf(stderr, "%s: warning: PMIx_Finalize: %s\n", g_progname, PMIx_Error_string(rc));
    }
#else
    (void)b;
#endif
}

void bootstrap_abort(Bootstrap *b, int code, const char *msg) {
#ifdef HAVE_PMIX
    /* NULL procs: every process of this namespace, i.e. the whole job step. The server (slurmd,
     * prted) kills them; PMIx_Abort returns only if it could not. */
    if (b->pmix_active) PMIx_Abort(code, msg, NULL, 0);
#else
    (void)b; (void)code; (void)msg;
#endif
}
