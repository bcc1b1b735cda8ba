/* SPDX-License-Identifier: BSD-3-Clause */
/* world.c - the process group (world.h): bootstrap, MPI's lifetime, the communicator, the id
 * exchange of a device communicator, the start-up check, the job-wide abort, the teardown. */
#include "build_config.h"
#include "world.h"

#include "comm_mpi.h"
#include "flight.h"
#include "rendezvous.h"
#include "base/util.h"

#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_MPI
#include <mpi.h>
#endif

int world_init(World *w, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    return bootstrap_init(&w->boot, err, errlen);
}

/* ---- MPI's lifetime ------------------------------------------------------------------------ */

#ifdef HAVE_MPI
/* MPI can only connect ranks that a PMIx-capable launcher started. For anything else MPI_Init
 * would start a singleton, and after a failed PMIx_Init Open MPI 4.1's singleton start crashes
 * its helper daemon and hangs; so such launches never touch MPI. */
static int mpi_can_connect(const Bootstrap *b) {
    return !strcmp(b->method, "pmix") || !strcmp(b->method, "ompi-env") || !strcmp(b->method, "slurm");
}

static int g_mpi_thread_level;

/* MPI up and seeing the ranks the bootstrap described. 0; 1 when MPI sees another world (the
 * ranks are singletons: finalizing is local, so MPI is finalized again and the caller may try
 * another channel), with why in err; -1 with err. */
static int mpi_up(World *w, char *err, size_t errlen) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        /* MULTIPLE when offered: the data loader's threads exist (they never call MPI). */
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &g_mpi_thread_level);
        if (rc != MPI_SUCCESS) return errf(err, errlen, "MPI_Init_thread failed (error %d)", rc);
        w->mpi_ours = 1;
    } else if (!w->mpi_ours) {
        MPI_Query_thread(&g_mpi_thread_level);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != w->boot.world_size || rank != w->boot.rank) {
        errf(err, errlen, "MPI sees rank %d of %d but the launcher (%s) said rank %d of %d: the ranks are not "
             "connected; start them with `srun --mpi=pmix` or `mpirun`", rank, size, w->boot.method, w->boot.rank,
             w->boot.world_size);
        if (w->mpi_ours) MPI_Finalize();
        w->mpi_ours = 0;
        return 1;
    }
    return 0;
}

static int mpi_is_up(void) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    return inited && !finalized;
}
#endif

int world_mpi_init(World *w, char *err, size_t errlen) {
#ifdef HAVE_MPI
    if (!mpi_can_connect(&w->boot))
        return errf(err, errlen, "MPI cannot connect the ranks of a %s-style launch", w->boot.method);
    return mpi_up(w, err, errlen) == 0 ? 0 : -1;
#else
    return errf(err, errlen, "ddptrain was built without MPI");
#endif
}

/* ---- the job-wide abort --------------------------------------------------------------------- */

void world_abort_job(World *w, int code) {
    fflush(stdout);
    fflush(stderr);
    if (w->comm) flight_dump(w->comm->flight, "abort");   /* a no-op after a timeout's own */
    if (w->boot.world_size > 1) {
#ifdef HAVE_MPI
        /* Under mpirun, MPI_Abort makes mpirun kill every rank; under srun it goes through
         * PMIx_Abort and Slurm cancels the step. */
        if (mpi_is_up()) MPI_Abort(MPI_COMM_WORLD, code);
#endif
        bootstrap_abort(&w->boot, code, "ddptrain: a rank ended the job");
    }
    /* No launcher to ask (torchrun-style): torchrun ends the others when one exits non-zero. */
    _exit(code);
}

static void abort_cb(void *ctx, int code) { world_abort_job((World *)ctx, code); }

/* ---- the device communicator's id ------------------------------------------------------------ */

#ifdef HAVE_MPI
/* Rank 0's bytes to every rank over MPI_COMM_WORLD itself, not a duplicate: MPI_Comm_dup is a
 * blocking collective that could hang, and nothing else uses MPI_COMM_WORLD before this.
 * Non-blocking and polled, like every wait: a blocking MPI_Bcast cannot time out. */
static int mpi_share(World *w, void *id, size_t len, double limit, char *err, size_t errlen) {
    MPI_Request req;
    int rc = MPI_Ibcast(id, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS) return errf(err, errlen, "MPI_Ibcast of the communicator id failed (error %d)", rc);
    double t0 = now_sec();
    for (;;) {
        int done = 0;
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return errf(err, errlen, "MPI_Test of the communicator id broadcast failed (error %d)", rc);
        if (done) return 0;
        double waited = now_sec() - t0;
        if (limit > 0 && waited > limit)
            return errf(err, errlen, "rank %d: the MPI broadcast of the communicator id did not complete within %g s; "
                        "a peer rank is probably dead or stuck", w->boot.rank, limit);
        if (waited < 1e-3) sched_yield();
        else nanosleep(&(struct timespec){0, 200000}, NULL);
    }
}
#endif

/* Rank 0's id on every rank, through the first channel the launch offers (world.h). A non-empty
 * rdv_key on return: the id went through a file, which rank 0 removes once the communicator is
 * up (every rank needed the id to join it, so every rank has read it then). */
static int share_id(World *w, void *id, size_t len, double limit, const char *rdv_dir, char *rdv_key, size_t keylen,
                    char *err, size_t errlen) {
    Bootstrap *b = &w->boot;
    if (bootstrap_has_kv(b)) {
        if ((b->rank == 0 && bootstrap_put(b, "ddp-comm-id", id, len) != 0) || bootstrap_commit_fence(b) != 0 ||
            bootstrap_get(b, 0, "ddp-comm-id", id, len) != 0)
            return errf(err, errlen, "could not exchange the communicator id through %s", b->method);
        snprintf(w->via, sizeof w->via, "PMIx key-value store");
        return 0;
    }
    char no_mpi[400] = "ddptrain was built without MPI";
#ifdef HAVE_MPI
    if (mpi_can_connect(b)) {
        int r = mpi_up(w, no_mpi, sizeof no_mpi);
        if (r < 0) return errf(err, errlen, "%s", no_mpi);
        if (r == 0) {
            if (mpi_share(w, id, len, limit, err, errlen) != 0) return -1;
            snprintf(w->via, sizeof w->via, "MPI broadcast");
            return 0;
        }
    } else {
        snprintf(no_mpi, sizeof no_mpi, "MPI cannot connect the ranks of a %s-style launch", b->method);
    }
#endif
    if (!rdv_dir)
        return errf(err, errlen, "%d ranks from a %s-style launch: the communicator id has neither a PMIx key-value "
                    "store nor MPI to travel through (%s), and no directory for a rendezvous file was given: pass "
                    "--job_dir DIR on a file system every node shares, or start the ranks with `srun --mpi=pmix` "
                    "or `mpirun`", b->world_size, b->method, no_mpi);
    if (rendezvous_key(b->world_size, rdv_key, keylen, err, errlen) != 0) return -1;
    if (rendezvous_share(rdv_dir, rdv_key, b->rank, b->world_size, id, len, limit, err, errlen) != 0) {
        rdv_key[0] = '\0';   /* rank 0 wrote nothing; the others must not remove anything */
        return -1;
    }
    snprintf(w->via, sizeof w->via, "rendezvous file");
    return 0;
}

static int connect_device(World *w, const DeviceCommFactory *dev, int device, double timeout_s, const char *rdv_dir,
                          char *err, size_t errlen) {
    const Bootstrap *b = &w->boot;
    CHECK(dev->id_bytes > 0 && dev->id_bytes <= WORLD_ID_MAX);
    /* Ranks arrive at different times (data, cuDNN plans): wait as long as the start-up check. */
    double limit = timeout_s > 0 ? timeout_s : 0;
    if (limit > 0 && limit < COMM_STARTUP_TIMEOUT_S) limit = COMM_STARTUP_TIMEOUT_S;
    unsigned char id[WORLD_ID_MAX];
    memset(id, 0, sizeof id);
    if (b->rank == 0 && dev->make_id(id, err, errlen) != 0) return -1;
    char key[RENDEZVOUS_KEY_MAX + 1] = "";
    if (share_id(w, id, dev->id_bytes, limit, rdv_dir, key, sizeof key, err, errlen) != 0) return -1;
    w->comm = dev->create(b->rank, b->world_size, device, id, timeout_s, err, errlen);
    if (key[0]) rendezvous_cleanup(rdv_dir, key, b->rank);
    if (!w->comm) return -1;
    const size_t used = strlen(w->comm->desc);
    snprintf(w->comm->desc + used, sizeof w->comm->desc - used, ", id by %.60s", w->via);
    return 0;
}

int world_connect(World *w, const DeviceCommFactory *dev, int device, double timeout_s, const char *rdv_dir,
                  char *err, size_t errlen) {
    CHECK(!w->comm);
    const Bootstrap *b = &w->boot;
    if (b->world_size == 1) {
        w->comm = comm_self_create();
    } else if (dev) {
        if (connect_device(w, dev, device, timeout_s, rdv_dir, err, errlen) != 0) return -1;
    } else {
#ifdef HAVE_MPI
        if (!mpi_can_connect(b))
            return errf(err, errlen, "%d ranks from a %s-style environment, but MPI can only connect ranks started by "
                        "`srun --mpi=pmix` or `mpirun`", b->world_size, b->method);
        if (mpi_up(w, err, errlen) != 0) return -1;
        w->comm = comm_mpi_create(timeout_s, g_mpi_thread_level, err, errlen);
        if (!w->comm) return -1;
#else
        (void)timeout_s;
        return errf(err, errlen, "%d ranks (%s) but ddptrain was built without MPI: rebuild with MPI (configure "
                    "--with-mpi) or run one process", b->world_size, b->method);
#endif
    }
    w->comm->on_abort = abort_cb;
    w->comm->on_abort_ctx = w;
    w->comm->flight = flight_create(b->rank, b->world_size, b->hostname);
    return 0;
}

/* ---- the start-up rule ----------------------------------------------------------------------- */

/* One row per rank: a failure flag and the reason; summed, so each row arrives as its rank
 * wrote it (the others' rows are zeros). */
enum { ROW_WORDS = 1 + WORLD_REASON_MAX / 8 };

static int startup_exchange(World *w, const char *reason) {
    Comm *c = w->comm;
    CHECK(w->started == 0);   /* once per run: a second call would mismatch collectives */
    const int n = c->world_size;
    int64_t *rows = callocCheck((size_t)n * ROW_WORDS, sizeof *rows);
    int64_t *mine = rows + (size_t)c->rank * ROW_WORDS;
    if (reason) {
        mine[0] = 1;
        snprintf((char *)(mine + 1), WORLD_REASON_MAX, "%s", reason);
    }
    char saved_ctx[sizeof c->context];
    memcpy(saved_ctx, c->context, sizeof saved_ctx);
    double saved_timeout = c->timeout_s;
    if (c->timeout_s > 0 && c->timeout_s < COMM_STARTUP_TIMEOUT_S) c->timeout_s = COMM_STARTUP_TIMEOUT_S;
    comm_set_context(c, "start-up check: waiting for every rank to finish start-up");
    comm_allreduce(c, rows, (size_t)n * ROW_WORDS, COMM_INT64, COMM_SUM);
    c->timeout_s = saved_timeout;
    memcpy(c->context, saved_ctx, sizeof saved_ctx);

    int nfailed = 0, first_ok = -1;
    for (int r = 0; r < n; r++) {
        if (rows[(size_t)r * ROW_WORDS]) nfailed++;
        else if (first_ok < 0) first_ok = r;
    }
    /* The lowest healthy rank speaks for the job: one line per failed rank (a few), with the
     * reason that rank gave, so the job's output says what happened wherever its stderr went. */
    if (nfailed > 0 && c->rank == first_ok) {
        fflush(stdout);
        int shown = 0;
        for (int r = 0; r < n && shown < 8; r++) {
            int64_t *row = rows + (size_t)r * ROW_WORDS;
            if (!row[0]) continue;
            char *why = (char *)(row + 1);
            why[WORLD_REASON_MAX - 1] = '\0';
            char line[4 * WORLD_REASON_MAX];   /* a control character in a name: one line all the same */
            fprintf(stderr, "%s: error: rank %d failed at start-up %s\n", g_progname, r, one_line(line, sizeof line, why));
            shown++;
        }
        if (nfailed > shown)
            fprintf(stderr, "%s: error: ... and %d more ranks failed at start-up\n", g_progname, nfailed - shown);
        fflush(stderr);
    }
    free(rows);
    w->started = nfailed ? -1 : 1;
    return nfailed;
}

int world_startup_check(World *w) { return startup_exchange(w, NULL); }

void world_startup_fail(World *w, int code, const char *reason) {
    fflush(stdout);
    fflush(stderr);
    if (w->started == 1) world_abort_job(w, code);
    if (w->comm && w->started == 0) {
        char why[WORLD_REASON_MAX];
        /* truncated to the row's size, the host name first */
        snprintf(why, sizeof why, "on host %.64s: %.180s", w->boot.hostname, reason && *reason ? reason : "see its log");
        startup_exchange(w, why);
    }
    /* Every rank now knows about the failure and leaves through here: a clean finalize. */
    world_free(w);
    exit(code);
}

/* ---- description and teardown ------------------------------------------------------------------ */

void world_free(World *w) {
    comm_free(w->comm);
    w->comm = NULL;
#ifdef HAVE_MPI
    /* MPI before PMIx: Open MPI uses the same PMIx client. MPI_Finalize may wait for the peers,
     * which is fine: every rank gets here at the end of a run or of a failed start-up. */
    if (w->mpi_ours && mpi_is_up()) {
        int rc = MPI_Finalize();
        if (rc != MPI_SUCCESS) fprintf(stderr, "%s: warning: MPI_Finalize: error %d\n", g_progname, rc);
    }
    w->mpi_ours = 0;
#endif
    bootstrap_free(&w->boot);
}
