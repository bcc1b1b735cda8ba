/* SPDX-License-Identifier: BSD-3-Clause */
/* train.c - ddptrain: data-parallel training of MiniResNet.
 *
 * main() reads as the algorithm: setup (signals, the world of ranks, flags, data, job directory
 * and logs) -> build_model (model, optimizer, reducer, rank 0's weights everywhere) ->
 * plan_steps -> resume_or_start -> train: per epoch { per step { agree_to_stop?,
 * optimizer_step (batches, forward, backward with buckets all-reduced while it runs, update),
 * log_progress when due, checkpoint when due }, end_epoch (evaluate, checkpoint) } -> finish
 * -> teardown. */
#include "build_config.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "agree.h"
#include "backend.h"
#include "checkpoint.h"
#include "resume.h"
#include "comm.h"
#include "config.h"
#include "dataloader.h"
#include "ema.h"
#include "flight.h"
#include "gpu_choice.h"
#include "host_mirror.h"
#include "linktest.h"
#include "logger.h"
#include "memavail.h"
#include "model.h"
#ifdef HAVE_CUDA_BACKEND
#include "plugin.h"   /* and CUDA_AMP_* (cuda/cuda_amp.h) */
#endif
#include "optim.h"
#include "reducer.h"
#include "roster.h"
#include "scaler.h"
#include "schedule.h"
#include "signals.h"
#include "straggler.h"
#include "timeacct.h"
#include "tta.h"
#include "trace.h"
#include "util.h"
#include "version.h"
#include "world.h"

/* Exit status of a run that stopped on the preemption signal after checkpointing; the sbatch
 * scripts in slurm/ requeue the job when they see it. */
#define EXIT_PREEMPTED 3
/* Exit status of --preflight when a rank or a link is below half the median rate (linktest.h). */
#define EXIT_PREFLIGHT_SLOW 4
/* Exit status of a run with --target_accuracy that ended without reaching it. */
#define EXIT_TARGET_MISSED 5
/* Steps between preemption checks of several ranks on GPUs (each check is a host round trip). */
#define PREEMPT_CHECK_STEPS_GPU 10
/* --comm_allreduce ring: all-reduces of at least this many bytes go round the ring */
#define RING_MIN_BYTES (32 * 1024)

/* ---- preemption signals ------------------------------------------------------------------- */

static volatile sig_atomic_t g_signal = 0;

static void on_signal(int sig) { g_signal = sig; }

/* Installed first thing in main, for every signal --preempt_signal may name, so that a signal
 * arriving during start-up is not lost; narrowed to the configured one once flags are read. */
static const int k_preempt_candidates[] = {SIGTERM, SIGUSR1, SIGUSR2, SIGHUP, SIGALRM};

static void install_signal_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    const int n = (int)(sizeof k_preempt_candidates / sizeof *k_preempt_candidates);
    for (int i = 0; i < n; i++) sigaction(k_preempt_candidates[i], &sa, NULL);
    /* taken by a thread of their own, never inside a oneDNN kernel (signals.h) */
    CHECK(signals_route(k_preempt_candidates, n) == 0);
}

static int signal_by_name(const char *name) {
    if (!strcmp(name, "SIGUSR1")) return SIGUSR1;
    if (!strcmp(name, "SIGUSR2")) return SIGUSR2;
    if (!strcmp(name, "SIGHUP")) return SIGHUP;
    if (!strcmp(name, "SIGALRM")) return SIGALRM;
    return SIGTERM;
}

/* SIGTERM and the configured signal stay caught; the others get their default action back. */
static void narrow_signal_handlers(int preempt) {
    for (size_t i = 0; i < sizeof k_preempt_candidates / sizeof *k_preempt_candidates; i++) {
        int s = k_preempt_candidates[i];
        if (s != SIGTERM && s != preempt) signal(s, SIG_DFL);
    }
    if (g_signal != 0 && g_signal != SIGTERM && g_signal != preempt) g_signal = 0;
}

/* ---- the run's context -------------------------------------------------------------------- */

typedef struct {
    Config cfg;
    World world;             /* the process group: bootstrap, MPI, the communicator */
    const Backend *be;       /* where the model lives: backend_cpu or the CUDA backend */
    int gpu;                 /* the CUDA device of this rank, -1 on the CPU */
    char device_note[1300];  /* why auto chose the CPU, for the log */
    /* --data_in_memory auto's budget per rank, read once so that both splits and the log line
     * use the same figure (memory_budget), and its account for the log */
    size_t mem_budget;
    char mem_how[560];
    Comm *comm;              /* world.comm */
    Logger log;
    char job_dir[4096];
    char ckpt_dir[4200];
    char *config_json;
    DataLoader *train_dl, *test_dl;
    Model model;
    SGD opt;
    Ema ema;                 /* --ema_decay's average (ema.h); ema.be is NULL when off */
    CkptEma ema_host;        /* its host copy for checkpoints and resumes */
    GradScaler scaler;       /* fp16 loss scaling; disabled otherwise */
    Schedule sched;
    Reducer reducer;
    Trace *trace;
    CheckpointWriter writer;
    RosterEntry *roster;     /* every rank's host and device (roster.h) */
    const char **hosts;      /* roster[q].host */
    Straggler straggler;
    TimeAcct time;           /* where the wall time goes; rank 0 keeps time.jsonl (timeacct.h) */
    float *own_buffers;      /* several ranks: this rank's running statistics (backend memory)
                              * while the model holds their average; see buffers_average */
    long steps_per_epoch, total_steps;
    float *x;                /* host batch from the data loader */
    int *y;
    float *dev_x;            /* the same on the device (device backends only) */
    float *tta_x, *tta_logits;   /* --tta's views of a chunk and their averaged logits (host) */
    int *dev_y;
#ifdef HAVE_CUDA_BACKEND
    const CudaPlugin *cuda;           /* the CUDA backend module, when this rank trains on a GPU */
    DeviceData *train_dd, *test_dd;   /* the splits held on the GPU; NULL: host batches uploaded */
#endif
    double t_last_hook;      /* trace of backward per layer */
    int hook_layer;
    /* where training is */
    long step, step_first;   /* global step now, and where this invocation began */
    long start_epoch, start_step;
    double t_train0;
    double t_proc0;          /* the process's start: start-up is t_train0 - t_proc0 */
    double last_acc, best_acc;
    long eval_step;          /* the global step of the last evaluation, -1 before any */
    int target_reached;      /* --target_accuracy: an evaluation reached it */
    double target_time;      /* seconds from t_train0 to the end of that evaluation */
    long target_step, target_epoch;
    struct {                 /* what the next progress line averages over */
        double t_start, data_wait, step_time;
        long images, steps;
    } win;
} Run;

/* Rank 0 decides the default job directory (it contains a pid); the others learn it after the
 * start-up check (share_job_dir), since no collective may come before it. */
static void propose_job_dir(Run *r) {
    r->job_dir[0] = '\0';
    if (r->world.boot.rank != 0) return;
    if (r->cfg.job_dir[0]) {
        snprintf_check(r->job_dir, sizeof r->job_dir, "%s", r->cfg.job_dir);
    } else if (bootstrap_default_job_dir(NULL, NULL, r->job_dir, sizeof r->job_dir, NULL, 0) > 0) {
        /* A requeued job has the same id, so it finds its checkpoints again. */
    } else {
        time_t t = time(NULL);
        struct tm tm;
        localtime_r(&t, &tm);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        snprintf_check(r->job_dir, sizeof r->job_dir, "runs/%s-%d", stamp, (int)getpid());
    }
}

static void share_job_dir(Run *r) {
    comm_set_context(r->comm, "sharing the job directory's name");
    comm_broadcast(r->comm, r->job_dir, sizeof r->job_dir, 0);
    snprintf_check(r->ckpt_dir, sizeof r->ckpt_dir, "%s/checkpoints", r->job_dir);
}

/* --data_in_memory auto's budget per rank: half of what this process may still take (the
 * node's MemAvailable, or less where a memory cgroup limits the job: memavail.h) shared among
 * the node's ranks (the other half is for the model, the batches and whatever else runs
 * there). 0 when neither can be read (then the share is held in memory, as with yes). `how`
 * gets the line's account of it. Called once, at start-up. */
static size_t memory_budget(const Run *r, char *how, size_t n) {
    MemAvail m;
    memavail_read(&m, "");
    /* Tests give one rank a small node: "RANK:KB" (tests/test_resume.sh). */
    const char *t = getenv("DDPTRAIN_TEST_MEMAVAILABLE_KB");
    int t_rank;
    unsigned long long t_kb;
    if (t && sscanf(t, "%d:%llu", &t_rank, &t_kb) == 2 && t_rank == r->world.boot.rank) {
        m.node_bytes = (double)t_kb * 1024.0;
        m.cgroup_bytes = -1.0;
    }
    const int local = r->world.boot.local_size > 0 ? r->world.boot.local_size : 1;
    char what[400];
    memavail_describe(&m, what, sizeof what);
    const size_t budget = (size_t)(memavail_bytes(&m) / 2.0 / local);
    snprintf(how, n, "budget %.1f MiB = half of %s / %d rank%s on this node", (double)budget / 1048576.0, what,
             local, local == 1 ? "" : "s");
    return budget;
}

static DataLoader *open_split(const Run *r, const char *split, int train, int mode, char *err, size_t n) {
    const Config *c = &r->cfg;
    if (mode < 0)
        mode = !strcmp(c->data_in_memory, "no") ? DL_MEMORY_NO : !strcmp(c->data_in_memory, "yes") ? DL_MEMORY_YES : DL_MEMORY_AUTO;
    DataLoaderOptions o = {
        .data_dir = c->data_dir, .split = split, .rank = r->world.boot.rank, .world_size = r->world.boot.world_size,
        .batch_size = (int)(train ? c->batch_size : c->eval_batch_size),
        .augment = train && c->augment, .crop_pad = c->crop_padding > 0 ? (int)c->crop_padding : -1,
        .alternating_flip = (int)c->alternating_flip, .shuffle = train && c->shuffle, .drop_last = train,
        .seed = (uint64_t)c->seed, .num_classes = (int)c->num_classes,
        .image_size = (int)c->image_size,
        /* on a GPU the batches are made there (device_data.h) from the loader's plans */
        .prefetch = c->prefetch && !r->be->on_device,
        .in_memory = mode,
        .memory_budget = r->mem_budget,
        .chunk_images = (int)c->data_chunk_images, .window_chunks = (int)c->data_window_chunks,
    };
    return dataloader_open(&o, err, n);
}

/* Threads per rank: --threads, else OMP_NUM_THREADS, else Slurm's CPUs per task, else this
 * process's CPUs shared among the ranks on this node, so that several ranks per node do not
 * oversubscribe the cores (which costs far more than it gains with OpenMP's spinning). */
static int choose_threads(const Run *r) {
    if (r->cfg.threads > 0) return (int)r->cfg.threads;
    const char *e = getenv("OMP_NUM_THREADS");
    if (e && atoi(e) > 0) return atoi(e);
    e = getenv("SLURM_CPUS_PER_TASK");
    if (e && atoi(e) > 0) return atoi(e);
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    int per = cpus / (r->world.boot.local_size > 0 ? r->world.boot.local_size : 1);
    return per > 0 ? per : 1;
}

/* --device: one GPU per rank (gpu_choice.h says which) with cuda, and with auto when this rank
 * sees a GPU; the CPU with cpu, and with auto when it does not (the log line says why). The CUDA
 * backend is a module (plugin.h) loaded here only: a CPU node need not have its libraries. */
static void choose_backend(Run *r) {
    r->be = &backend_cpu;
    r->gpu = -1;
    r->device_note[0] = '\0';
    if (!strcmp(r->cfg.device, "cpu")) return;
#ifdef HAVE_CUDA_BACKEND
    char err[1200];
    const CudaPlugin *cu = NULL;
    const PluginStatus loaded = plugin_cuda_load(&cu, err, sizeof err);
    /* a module of another build is a broken installation, not a node without GPUs */
    if (loaded == PLUGIN_INCOMPATIBLE) die("--device %s: rank %d: %s", r->cfg.device, r->world.boot.rank, err);
    if (loaded != PLUGIN_LOADED) {
        if (!strcmp(r->cfg.device, "cuda")) die("--device cuda: rank %d: %s", r->world.boot.rank, err);
        snprintf(r->device_note, sizeof r->device_note, "%s", err);
        return;
    }
    if (!cu->comm_nccl_create && !strcmp(r->cfg.device, "auto") && r->world.boot.world_size > 1) {
        snprintf(r->device_note, sizeof r->device_note, "%d ranks on GPUs need NCCL, which this build lacks",
                 r->world.boot.world_size);
        return;
    }
    const Bootstrap *b = &r->world.boot;
    const int visible = cu->device_count();
    const int dev = gpu_choose(b->local_rank, b->local_size, visible, getenv("CUDA_VISIBLE_DEVICES"), err, sizeof err);
    const Backend *g = dev >= 0 ? cu->backend_open(dev, err, sizeof err) : NULL;
    if (g) {
        r->be = g;
        r->gpu = dev;
        r->cuda = cu;
        /* their kernels are written but have not yet run on a GPU (ops_cuda.h) */
        if (r->cfg.nesterov) die("--nesterov: not available on the GPU backend yet; pass --device cpu");
        if (r->cfg.label_smoothing > 0) die("--label_smoothing: not available on the GPU backend yet; pass --device cpu");
        /* the views are made from host batches; a GPU holds its test split on the device */
        if (strcmp(r->cfg.tta, "none") != 0) die("--tta %s: not available on the GPU backend yet; pass --device cpu", r->cfg.tta);
        /* before the model exists: each convolution takes its precision at init */
        cu->set_tf32((int)r->cfg.tf32);
        cu->set_conv_benchmark((int)r->cfg.cudnn_benchmark);
        const int amp = !r->cfg.use_amp ? CUDA_AMP_OFF : !strcmp(r->cfg.amp_dtype, "fp16") ? CUDA_AMP_FP16 : CUDA_AMP_BF16;
        cu->set_amp(amp);
        cu->set_act_storage(!strcmp(r->cfg.amp_activations, "16") ? amp : CUDA_AMP_OFF);
        if (!cu->comm_nccl_create && r->world.boot.world_size > 1)
            die("--device %s: %d ranks on GPUs need NCCL, which this build lacks", r->cfg.device, r->world.boot.world_size);
        return;
    }
    if (!strcmp(r->cfg.device, "cuda")) die("--device cuda: rank %d: %s", b->rank, err);
    /* auto on a rank that sees GPUs but cannot use its own (more ranks than GPUs on the node):
     * falling back to the CPU would leave it with MPI while its peers use NCCL, and their
     * communicators would never meet. */
    if (b->world_size > 1 && visible > 0)
        die("--device auto: rank %d sees %d GPU(s) but cannot use one (%s); start one rank per GPU, or pass "
            "--device cpu", b->rank, visible, err);
    snprintf(r->device_note, sizeof r->device_note, "no usable GPU (%s)", err);
#else
    if (!strcmp(r->cfg.device, "cuda")) {
        g_die_quiet = r->world.boot.rank != 0;
        die_code(2, "--device cuda: this ddptrain was built without the CUDA backend");
    }
    snprintf(r->device_note, sizeof r->device_note, "built without the CUDA backend");
#endif
}

/* Whether mkdir -p of `dir` would succeed: the nearest existing ancestor must be a
 * directory we may write into (or `dir` itself an existing writable directory). */
static int job_dir_creatable(const char *dir, char *err, size_t n) {
    char p[4096];
    snprintf_check(p, sizeof p, "%s", dir);
    struct stat st;
    while (stat(p, &st) != 0) {
        if (errno != ENOENT) return errf(err, n, "--job_dir %s: cannot create directory: %s", dir, strerror(errno));
        char *slash = strrchr(p, '/');
        if (!slash) { snprintf_check(p, sizeof p, "."); continue; }
        if (slash == p) slash[1] = '\0'; else *slash = '\0';
    }
    if (!S_ISDIR(st.st_mode)) return errf(err, n, "--job_dir %s: cannot create directory: %s", dir, strerror(ENOTDIR));
    if (access(p, W_OK | X_OK) != 0)
        return errf(err, n, "--job_dir %s: %s: %s", dir, strcmp(p, dir) ? "cannot create directory" : "not writable",
                    strerror(errno));
    return 0;
}

/* A rank's failure before training: print it, and make every rank exit (world.h's rule); the
 * lowest healthy rank repeats the reason for the job's output. */
static void startup_fail(Run *r, const char *msg) {
    fflush(stdout);
    if (r->world.boot.world_size > 1) fprintf(stderr, "%s: error: rank %d: %s\n", g_progname, r->world.boot.rank, msg);
    else fprintf(stderr, "%s: error: %s\n", g_progname, msg);
    fflush(stderr);
    world_startup_fail(&r->world, 1, msg);
}

static World *g_die_world;

/* die() after start-up: every rank is inside collectives, so one rank's error ends them all. */
static void die_ends_job(int code) {
    if (g_die_world && g_die_world->boot.world_size > 1) world_abort_job(g_die_world, code);
}

/* A verdict every rank reached from the same numbers (a refusal before training): `reporter`
 * says it and ends the job; the others wait for that in a barrier, so that no rank's abort
 * cuts the line short. */
static void refuse(Run *r, int reporter, const char *msg) {
    if (r->world.boot.rank != reporter) {
        comm_set_context(r->comm, "waiting for the rank that says why the job is refused");
        comm_barrier(r->comm);
    }
    die("%s", msg);
}

static void require_agreement(Run *r, const Agreement *a) {
    char err[1024];
    int reporter = 0;
    if (r->world.boot.world_size > 1 && agree_check(a, r->comm, r->hosts, &reporter, err, sizeof err) != 0)
        refuse(r, reporter, err);
}

/* ---- collectives the loop needs --------------------------------------------------------- */

static long allreduce_min_long(Comm *c, long v) {
    int64_t *all = callocCheck((size_t)c->world_size, sizeof *all);
    all[c->rank] = v;
    comm_allreduce(c, all, (size_t)c->world_size, COMM_INT64, COMM_SUM);
    long m = v;
    for (int i = 0; i < c->world_size; i++) if (all[i] < m) m = (long)all[i];
    free(all);
    return m;
}

/* Holds the training split the other way (DL_MEMORY_YES or NO): the sample order changes with
 * it (dataloader.h), so --data_in_memory auto must not leave ranks or resumes to differ. */
static void reopen_train_split(Run *r, int mode, const char *why) {
    char err[1024];
    DataLoader *dl = open_split(r, "train", 1, mode, err, sizeof err);
    if (!dl) die("%s", err);
    dataloader_free(r->train_dl);
    r->train_dl = dl;
    log_info(&r->log, "data: train %s (%s)", dataloader_memory_note(dl), why);
}

/* --data_in_memory auto decides per rank from its node's memory; the job streams on every rank
 * when one rank must, so that all ranks' data orders are of one kind and a checkpoint records
 * one (resume.h). */
static void agree_on_storage(Run *r) {
    if (strcmp(r->cfg.data_in_memory, "auto") != 0 || r->world.boot.world_size == 1) return;
    const int streams = dataloader_streaming(r->train_dl);
    if (allreduce_min_long(r->comm, streams ? 0 : 1) == 0 && !streams)
        reopen_train_split(r, DL_MEMORY_NO, "--data_in_memory auto: another rank streams its share, so every rank does");
}

/* Model's StatsAllreduceFn for --sync_bn: in backward, between the reducer's progress
 * thread's turns (reducer.h). */
static void sync_bn_stats(void *ctx, double *buf, size_t n) {
    Run *r = ctx;
    reducer_lock(&r->reducer);
    comm_allreduce(r->comm, buf, n, COMM_FLOAT64, COMM_SUM);
    reducer_unlock(&r->reducer);
}

/* Model's GradReadyFn: trace the layer's backward, then hand over to the reducer. */
static void on_grad_ready(void *ctx, size_t offset) {
    Run *r = ctx;
    double t = now_sec();
    trace_event(r->trace, "backward layer", "compute", r->hook_layer++, 0, r->t_last_hook, t);
    r->t_last_hook = t;
    reducer_grad_ready(&r->reducer, offset);
}

/* Batch-norm running statistics on several ranks. Each rank's follow its own batches, and
 * nothing else ever changes them: evaluation and checkpoints use their average over the
 * ranks, which buffers_average puts into the model for that time only, keeping the rank's own
 * in own_buffers, and buffers_restore puts back, bit for bit. So how often a run averaged
 * (an interrupted run checkpoints once more than an uninterrupted one) changes nothing, and a
 * checkpoint stores every rank's own statistics beside their average (checkpoint.h,
 * /train_state/rank_buffers), from which a resume on as many ranks gives each rank its own
 * back. On one rank the average is the rank's statistics, and all of this does nothing. */
static void buffers_average(Run *r) {
    if (r->world.boot.world_size == 1) return;
    const size_t bytes = r->model.num_buffers * sizeof(float);
    if (!r->own_buffers) r->own_buffers = r->be->alloc(bytes);
    r->be->copy(r->own_buffers, r->model.buffers, bytes);
    comm_set_context(r->comm, "averaging batch-norm running statistics");
    comm_allreduce(r->comm, r->model.buffers, r->model.num_buffers, COMM_FLOAT32, COMM_AVG);
}

static void buffers_restore(Run *r) {
    if (r->world.boot.world_size == 1) return;
    r->be->copy(r->model.buffers, r->own_buffers, r->model.num_buffers * sizeof(float));
}

/* Every rank's own running statistics, row r = rank r's, on rank 0 (malloc'd, the caller
 * frees); NULL on the other ranks and on one rank. Collective: one broadcast per rank, so
 * the bits arrive as they are. Before buffers_average, while the model holds the rank's own. */
static float *buffers_gather(Run *r) {
    const int world = r->world.boot.world_size;
    if (world == 1) return NULL;
    const size_t n = r->model.num_buffers;
    float *rows = mallocCheck((size_t)world * n * sizeof(float));
    r->be->download(rows + (size_t)r->world.boot.rank * n, r->model.buffers, n * sizeof(float));
    comm_set_context(r->comm, "gathering every rank's batch-norm running statistics for the checkpoint");
    for (int q = 0; q < world; q++) comm_broadcast(r->comm, rows + (size_t)q * n, n * sizeof(float), q);
    if (r->world.boot.rank == 0) return rows;
    free(rows);
    return NULL;
}

/* FNV-1a of the parameters' bytes. */
static uint64_t params_checksum(Run *r) {
    size_t bytes = r->model.num_params * sizeof(float);
    unsigned char *p = r->be->on_device ? mallocCheck(bytes) : (unsigned char *)r->model.params;
    if (r->be->on_device) r->be->download(p, r->model.params, bytes);
    uint64_t h = agree_hash(0, p, bytes);
    if (r->be->on_device) free(p);
    return h;
}

/* Identical weights everywhere: rank 0's are broadcast, then a checksum is compared. */
static void broadcast_weights(Run *r) {
    comm_set_context(r->comm, "broadcasting initial weights");
    comm_broadcast(r->comm, r->model.params, r->model.num_params * sizeof(float), 0);
    comm_broadcast(r->comm, r->model.buffers, r->model.num_buffers * sizeof(float), 0);
    model_params_changed(&r->model);
    int64_t mine = (int64_t)(params_checksum(r) >> 1), ref = mine, bad;
    comm_broadcast(r->comm, &ref, sizeof ref, 0);
    bad = mine != ref;
    comm_allreduce(r->comm, &bad, 1, COMM_INT64, COMM_SUM);
    if (bad) die("initial weights differ on %ld rank(s) after the broadcast", (long)bad);
    log_info(&r->log, "weights: identical on all %d ranks (checksum %016llx)", r->world.boot.world_size,
             (unsigned long long)mine);
}

/* Back to training after an evaluation or a checkpoint, and a record of it in time.jsonl: a
 * run killed later is then accounted from its last phase change (timeacct.h). */
static void back_to_training(Run *r) {
    timeacct_train(&r->time, r->step);
    if (timeacct_write(&r->time, r->step, TIMEACCT_PHASE) != 0) log_warn(&r->log, "%s: cannot write: %s", r->time.path, strerror(errno));
}

/* ---- checkpoints ------------------------------------------------------------------------ */

/* <job_dir>/preempted, written by rank 0 once the preemption checkpoint is on disk: "restart R
 * step S". The sbatch scripts requeue on exit status 3, or when this file names the current
 * restart: with srun --kill-on-bad-exit, the first rank to exit 3 gets the others killed, and
 * srun may then report 137 instead. Removed at every start, so it never outlives its run. */
#define PREEMPTED_MARKER "preempted"

static void write_preempted_marker(Run *r, long step) {
    char path[4200], text[128];
    snprintf_check(path, sizeof path, "%s/" PREEMPTED_MARKER, r->job_dir);
    const char *restart = getenv("SLURM_RESTART_COUNT");
    snprintf(text, sizeof text, "restart %ld step %ld\n", restart && *restart ? atol(restart) : 0L, step);
    if (write_file_atomic(path, text, strlen(text)) != 0)
        log_warn(&r->log, "preemption: cannot write %s: %s (the job script may not requeue)", path, strerror(errno));
}

static void remove_preempted_marker(Run *r) {
    char path[4200];
    snprintf_check(path, sizeof path, "%s/" PREEMPTED_MARKER, r->job_dir);
    if (unlink(path) != 0 && errno != ENOENT) die("%s: cannot remove: %s", path, strerror(errno));
}

static void save_checkpoint(Run *r, long epoch, long step_in_epoch, long global_step, int wait) {
    timeacct_enter(&r->time, TIME_CHECKPOINT);
    reducer_drain(&r->reducer);   /* no reduction in flight while the host reads the device */
    /* /model gets the running statistics averaged over the ranks, /train_state/rank_buffers
     * every rank's own; every rank takes part, and goes on with its own afterwards. */
    float *rank_buffers = buffers_gather(r);
    buffers_average(r);
    if (r->world.boot.rank == 0) {
        TrainState ts = {.epoch = epoch, .step_in_epoch = step_in_epoch, .global_step = global_step,
                         .world_size = r->world.boot.world_size, .seed = (uint64_t)r->cfg.seed};
        resume_stamp(&ts, r->cfg.batch_size, r->cfg.grad_accum_steps, r->cfg.seed, r->train_dl);
        if (r->scaler.enabled) {
            ts.has_amp = 1;
            ts.amp[AMP_LOSS_SCALE] = scaler_get_scale(&r->scaler);
            ts.amp[AMP_GROWTH_TRACKER] = scaler_get_tracker(&r->scaler);
        }
        char path[CKPT_PATH_MAX], err[1200];
        checkpoint_path(path, sizeof path, r->ckpt_dir, global_step);
        HostMirror h;
        host_mirror_open(&h, &r->model, &r->opt);
        host_mirror_pull(&h, &r->model, &r->opt);
        const CkptEma *ema = NULL;
        if (r->ema.be && r->ema.n_averaged > 0) {
            ema_download(&r->ema, r->ema_host.params, r->ema_host.buffers, r->ema_host.nbt);
            r->ema_host.n_averaged = r->ema.n_averaged;
            r->ema_host.decay = r->ema.decay;
            ema = &r->ema_host;
        }
        if (checkpoint_writer_submit_ema(&r->writer, path, h.model, h.opt, &ts, rank_buffers, ema, r->config_json, err,
                                         sizeof err) != 0)
            log_warn(&r->log, "checkpoint: previous write failed: %s", err);
        host_mirror_close(&h);
        log_info(&r->log, "checkpoint: %s (epoch %ld, step %ld; training paused %.1f ms)", path, epoch + 1,
                 global_step, 1e3 * r->writer.last_submit_sec);
        if (wait && checkpoint_writer_wait(&r->writer, err, sizeof err) != 0)
            log_warn(&r->log, "checkpoint: write failed: %s", err);
    }
    buffers_restore(r);
    free(rank_buffers);
    back_to_training(r);
}

static void log_skipped_checkpoint(void *ctx, const char *path, const char *reason) {
    log_warn((Logger *)ctx, "resume: skipping %s: %s; falling back to the previous checkpoint", path, reason);
}

/* Returns 1 when a checkpoint was loaded (ts filled), 0 for a fresh start. */
static int maybe_resume(Run *r, TrainState *ts) {
    char path[CKPT_PATH_MAX] = "", err[1200] = "";
    int status = 0;   /* 0 found, 1 none, -1 error */
    if (r->world.boot.rank == 0) {
        if (!strcmp(r->cfg.resume, "none")) {
            status = 1;
        } else if (!strcmp(r->cfg.resume, "auto")) {
            status = checkpoint_find_latest(r->ckpt_dir, &r->model, path, sizeof path, log_skipped_checkpoint,
                                            &r->log, err, sizeof err);
        } else {
            snprintf_check(path, sizeof path, "%s", r->cfg.resume);
            status = checkpoint_verify(path, &r->model, err, sizeof err) == 0 ? 0 : -1;
            if (status != 0 && err[0] == '\0') snprintf(err, sizeof err, "--resume %s: not a usable checkpoint", path);
        }
    }
    int64_t st = status;
    comm_broadcast(r->comm, &st, sizeof st, 0);
    comm_broadcast(r->comm, path, sizeof path, 0);
    comm_broadcast(r->comm, err, sizeof err, 0);
    if (st == 1) return 0;
    if (st < 0) {
        if (!strcmp(r->cfg.resume, "auto"))
            die("--resume auto: no usable checkpoint in %s (%s); pass --resume none to start over", r->ckpt_dir, err);
        die("%s", err);
    }
    HostMirror h;
    host_mirror_open(&h, &r->model, &r->opt);
    int own = 0;
    /* the file's /ema is read (and checked) whether this run averages or not */
    CkptEma fe = {0};
    if (!r->ema.be) {
        fe.params = mallocCheck(r->model.num_params * sizeof(float));
        fe.buffers = mallocCheck(r->model.num_buffers * sizeof(float));
        fe.nbt = callocCheck((size_t)model_bn_count(&r->model), sizeof(int64_t));
    }
    CkptEma *fema = r->ema.be ? &r->ema_host : &fe;
    if (checkpoint_load_ema(path, h.model, h.opt, ts, r->world.boot.rank, r->world.boot.world_size, &own, fema, err,
                            sizeof err) != 0)
        die("%s", err);
    if (r->ema.be && fema->n_averaged > 0) {
        ema_upload(&r->ema, fema->params, fema->buffers, fema->nbt, fema->n_averaged);
        log_info(&r->log, "resume: EMA: the average of %ld update%s (decay %g%s)", fema->n_averaged,
                 fema->n_averaged == 1 ? "" : "s", fema->decay,
                 fema->decay == r->cfg.ema_decay ? "" : "; it goes on with this run's --ema_decay");
    } else if (r->ema.be) {
        log_info(&r->log, "resume: EMA: the checkpoint holds no average; it starts as a copy of the model at the next update");
    } else if (fema->n_averaged > 0) {
        log_info(&r->log, "resume: the checkpoint's EMA (/ema) is not used by this run (--ema_decay 0) and is not kept");
    }
    free(fe.params);
    free(fe.buffers);
    free(fe.nbt);
    host_mirror_push(&h, &r->model, &r->opt);
    host_mirror_close(&h);
    /* --data_in_memory auto follows the checkpoint: a requeued job goes on in the order it
     * stopped in, whatever memory its new node has (every rank read the same file, and
     * agree_on_storage made the ranks' choices one). */
    if (!strcmp(r->cfg.data_in_memory, "auto") && ts->has_data_order &&
        (ts->data_chunk_images == 0) != !dataloader_streaming(r->train_dl))
        reopen_train_split(r, ts->data_chunk_images == 0 ? DL_MEMORY_YES : DL_MEMORY_NO,
                           ts->data_chunk_images == 0 ? "--data_in_memory auto: held in memory as when the checkpoint was written"
                                                      : "--data_in_memory auto: streamed as when the checkpoint was written");
    TrainState now = *ts;
    resume_stamp(&now, r->cfg.batch_size, r->cfg.grad_accum_steps, r->cfg.seed, r->train_dl);
    if (resume_check(ts, &now, r->cfg.data_dir, err, sizeof err) != 0) {
        g_die_quiet = r->world.boot.rank != 0;   /* every rank finds the same */
        if (!r->cfg.resume_data_change) die("%s: %s; %s", path, err, RESUME_REFUSAL_HINT);
        g_die_quiet = 0;
        log_warn(&r->log, "resume: %s: %s; --resume_data_change: going on from the start of the next epoch", path, err);
        resume_next_epoch(ts);
    }
    log_info(&r->log, "resume: %s: epoch %ld, step %ld of the epoch, global step %ld (written by %d rank%s)", path,
             ts->epoch + 1, ts->step_in_epoch, ts->global_step, ts->world_size, ts->world_size == 1 ? "" : "s");
    /* Every rank reads the same file, so `own` is the same on every rank. */
    if (own)
        log_info(&r->log, "resume: batch norm: every rank continues from its own running statistics");
    else if (r->world.boot.world_size > 1 || ts->world_size > 1)
        log_info(&r->log, "resume: batch norm: every rank starts from the running statistics averaged over the "
                 "checkpoint's %d rank%s%s", ts->world_size, ts->world_size == 1 ? "" : "s",
                 ts->world_size == r->world.boot.world_size ? " (it holds no per-rank statistics)" : "");
    if (r->scaler.enabled && ts->has_amp) {
        const double sc = ts->amp[AMP_LOSS_SCALE], tr = ts->amp[AMP_GROWTH_TRACKER];
        if (!(sc > 0.0 && sc < 3.4e38 && tr >= 0.0 && tr < 2147483647.0))
            die("%s: /train_state/amp holds an invalid loss scale %g or growth tracker %g", path, sc, tr);
        scaler_set(&r->scaler, (float)sc, (int)tr);
        log_info(&r->log, "resume: fp16 loss scale %g, %d clean steps towards the next growth", sc, (int)tr);
    } else if (r->scaler.enabled) {
        log_info(&r->log, "resume: the checkpoint has no loss-scaler state; fp16 loss scale starts at %g",
                 (double)r->scaler.init_scale);
    } else if (ts->has_amp) {
        log_info(&r->log, "resume: the checkpoint's fp16 loss-scaler state is not needed by this run (%s)",
                 r->be->on_device ? "no fp16" : "CPU");
    }
    if (ts->world_size != r->world.boot.world_size)
        log_warn(&r->log, "resume: checkpoint from %d ranks, running on %d: the rest of epoch %ld follows this world "
                 "size's data order from step %ld (some of its samples may be seen twice or not at all)",
                 ts->world_size, r->world.boot.world_size, ts->epoch + 1, ts->step_in_epoch);
    return 1;
}

/* ---- evaluation ------------------------------------------------------------------------- */

/* The batch where the model can read it: the loader's host arrays on the CPU, uploaded copies
 * on a device backend. */
static const float *batch_to_backend(Run *r, const float *x, int n) {
    if (!r->be->on_device) return x;
    size_t img = (size_t)r->cfg.image_size * r->cfg.image_size * 3;
    r->be->upload(r->dev_x, x, (size_t)n * img * sizeof(float));
    return r->dev_x;
}

static const int *batch_labels(Run *r, const int *y, int n) {
    if (!r->be->on_device) return y;
    r->be->upload(r->dev_y, y, (size_t)n * sizeof(int));
    return r->dev_y;
}

/* The next batch of `dl` where the model reads it: made on the GPU from the split held there,
 * or from the loader's host arrays (uploaded on a device backend). Returns n, 0 at the end. */
static int next_batch(Run *r, DataLoader *dl, const float **x, const int **y) {
#ifdef HAVE_CUDA_BACKEND
    DeviceData *dd = dl == r->train_dl ? r->train_dd : r->test_dd;
    if (dd) {
        int n;
        r->cuda->device_data_next(dd, dl, r->dev_x, r->dev_y, &n);
        *x = r->dev_x;
        *y = r->dev_y;
        return n;
    }
#endif
    int n = dataloader_next(dl, r->x, r->y);
    if (n > 0) {
        *x = batch_to_backend(r, r->x, n);
        *y = batch_labels(r, r->y, n);
    }
    return n;
}

/* Accuracy over the whole test split, every rank evaluating its part; exact sums. */
static double evaluate(Run *r, double *loss_out) {
    reducer_drain(&r->reducer);
    DataLoader *dl = r->test_dl;
    dataloader_start_epoch(dl, 0, 0);
    double sums[3] = {0.0, 0.0, 0.0};   /* correct, total, loss*n */
    int n;
    const float *x;
    const int *y;
    while ((n = next_batch(r, dl, &x, &y)) > 0) {
        /* an evaluation batch larger than the training batch goes through in chunks */
        long c;
        double loss_sum;
        const int tta = tta_parse(r->cfg.tta);
        if (tta != TTA_NONE) tta_evaluate(&r->model, tta, x, y, n, r->tta_x, r->tta_logits, &c, &loss_sum);
        else model_evaluate(&r->model, x, y, n, &c, &loss_sum);
        sums[0] += (double)c;
        sums[1] += n;
        sums[2] += loss_sum;
    }
    comm_set_context(r->comm, "evaluation totals");
    comm_allreduce(r->comm, sums, 3, COMM_FLOAT64, COMM_SUM);   /* integers < 2^53: exact */
    *loss_out = sums[1] > 0 ? sums[2] / sums[1] : 0.0;
    return sums[1] > 0 ? sums[0] / sums[1] : 0.0;
}

/* ---- setup ------------------------------------------------------------------------------- */

#ifdef HAVE_CUDA_BACKEND
/* Where the NCCL id may travel as a file (world.h's last channel): a directory
 * every rank can name before any communicator exists: --job_dir, or the Slurm default job
 * directory; NULL otherwise. */
static const char *nccl_rendezvous_dir(const Run *r, char *dir, size_t n) {
    const char *job = getenv("SLURM_JOB_ID"), *submit = getenv("SLURM_SUBMIT_DIR");
    if (r->cfg.job_dir[0]) snprintf_check(dir, n, "%s", r->cfg.job_dir);
    else if (job && *job) snprintf_check(dir, n, "%s/runs/%s", submit && *submit ? submit : ".", job);
    else return NULL;
    return dir;
}
#endif

/* The communicator this rank's backend needs: NCCL between GPUs, through the CUDA module. */
static int connect_world(Run *r, char *err, size_t errlen) {
#ifdef HAVE_CUDA_BACKEND
    if (r->be->on_device && r->world.boot.world_size > 1) {   /* choose_backend checked for NCCL */
        const DeviceCommFactory nccl = {
            .name = "nccl", .id_bytes = r->cuda->nccl_id_bytes,
            .make_id = r->cuda->comm_nccl_make_id, .create = r->cuda->comm_nccl_create,
        };
        char rdv_dir[4096];
        return world_connect(&r->world, &nccl, r->gpu, r->cfg.comm_timeout,
                             nccl_rendezvous_dir(r, rdv_dir, sizeof rdv_dir), err, errlen);
    }
#endif
    return world_connect(&r->world, NULL, -1, r->cfg.comm_timeout, NULL, err, errlen);
}

/* Who every rank is (one collective; rank 0 logs the table at the end of setup), then what is
 * refused before training, with the rank and host named: two ranks on one GPU, and ranks that
 * disagree on the options that must match or on the shard lists they see (agree.h). */
static void preflight(Run *r) {
    const Bootstrap *b = &r->world.boot;
    RosterEntry me;
    memset(&me, 0, sizeof me);
    snprintf(me.host, sizeof me.host, "%.*s", (int)sizeof me.host - 1, b->hostname);   /* cut: see roster.h */
    me.local_rank = b->local_rank;
    me.local_size = b->local_size;
#ifdef _OPENMP
    me.threads = omp_get_max_threads();
#else
    me.threads = 1;
#endif
    cpu_set_t set;
    me.cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    me.gpu = r->gpu;
    roster_gpu_id(r->gpu, getenv("CUDA_VISIBLE_DEVICES"), me.gpu_id, sizeof me.gpu_id);
    r->roster = callocCheck((size_t)b->world_size, sizeof *r->roster);
    r->hosts = callocCheck((size_t)b->world_size, sizeof *r->hosts);
    if (b->world_size > 1) roster_gather(r->comm, &me, r->roster);
    else r->roster[0] = me;
    for (int q = 0; q < b->world_size; q++) r->hosts[q] = r->roster[q].host;
    int qa, qb;
    if (roster_find_shared_gpu(r->roster, b->world_size, &qa, &qb)) {
        char msg[512];
        snprintf(msg, sizeof msg, "rank %d and rank %d on host %s would both train on GPU %s (physical %s); give each rank "
                 "its own GPU (one rank per GPU, or CUDA_VISIBLE_DEVICES per rank)", qa, qb, r->hosts[qa],
                 r->roster[qa].gpu_id, r->roster[qa].gpu_id);
        refuse(r, 0, msg);
    }
    Agreement a;
    agree_init(&a);
    agree_add(&a, "the ddptrain version", PACKAGE_VERSION, PACKAGE_VERSION, strlen(PACKAGE_VERSION));
    agree_add_config(&a, &r->cfg);
    const uint64_t train_h = dataloader_shard_list_hash(r->train_dl), test_h = dataloader_shard_list_hash(r->test_dl);
    agree_add(&a, "the train shard list of --data_dir", "", &train_h, sizeof train_h);
    agree_add(&a, "the test shard list of --data_dir", "", &test_h, sizeof test_h);
    require_agreement(r, &a);
    straggler_init(&r->straggler, b->world_size, r->cfg.straggler_factor, r->cfg.log_interval);
}

/* A file rank 0 writes into the job directory and every rank reads back (check_job_dir_shared). */
#define JOBDIR_CHECK_FILE ".jobdir-check"
#define JOBDIR_CHECK_SEC 5.0   /* NFS may show a new file to another node a moment late */
#define JOBDIR_CHECK_OTHER (-1)   /* the file is there with another token */

/* Rank 0, once the job directory exists: the file every rank reads back, with a token of this
 * start's own. 0, or -1 with errno. */
static int write_job_dir_check(Run *r, uint64_t token) {
    char path[4200], text[64];
    snprintf_check(path, sizeof path, "%s/" JOBDIR_CHECK_FILE, r->job_dir);
    snprintf(text, sizeof text, "%016llx\n", (unsigned long long)token);
    return write_file_atomic(path, text, strlen(text));
}

/* 0 when the file holds the token, else an errno or JOBDIR_CHECK_OTHER. */
static int read_job_dir_check(const char *path, uint64_t token) {
    FILE *f = fopen(path, "r");
    if (!f) return errno ? errno : EIO;
    unsigned long long got = 0;
    const int n = fscanf(f, "%16llx", &got);
    fclose(f);
    return n == 1 && got == token ? 0 : JOBDIR_CHECK_OTHER;
}

/* Every rank reads back what rank 0 wrote into the job directory. A node that does not share
 * it (a node-local /scratch, a missing mount) would otherwise write its logs into a directory
 * of its own and fail hours later, when a resume reads a checkpoint only rank 0's node has.
 * Refused now, naming the rank and host; one collective. */
static void check_job_dir_shared(Run *r, uint64_t token) {
    const int world = r->world.boot.world_size, rank = r->world.boot.rank;
    char path[4200];
    snprintf_check(path, sizeof path, "%s/" JOBDIR_CHECK_FILE, r->job_dir);
    int64_t *fail = callocCheck((size_t)world, sizeof *fail);
    if (rank != 0) {
        const double t0 = now_sec();
        int e;
        while ((e = read_job_dir_check(path, token)) != 0 && now_sec() - t0 < JOBDIR_CHECK_SEC) {
            struct timespec ts = {0, 100000000};
            nanosleep(&ts, NULL);
        }
        fail[rank] = e;
    }
    comm_set_context(r->comm, "checking that every rank reads the job directory back");
    comm_allreduce(r->comm, fail, (size_t)world, COMM_INT64, COMM_SUM);   /* one nonzero term each */
    if (rank == 0) unlink(path);
    int q = 0, n = 0;
    for (int i = world - 1; i > 0; i--)
        if (fail[i]) {
            q = i;
            n++;
        }
    if (n > 0) {
        char msg[5200];
        snprintf(msg, sizeof msg, "rank %d on host %s cannot read back %s, which rank 0 on host %s wrote: %s%s; --job_dir "
                 "must be on a file system every node shares", q, r->hosts[q], path, r->hosts[0],
                 fail[q] == JOBDIR_CHECK_OTHER ? "it holds another file (a node-local directory of the same name?)"
                                               : strerror((int)fail[q]),
                 n > 1 ? " (and more ranks)" : "");
        free(fail);
        refuse(r, 0, msg);
    }
    free(fail);
}

/* Options that only make sense together, refused as a bad flag is (exit 2), as PyTorch's
 * constructors refuse them. */
static void check_recipe(const Config *c) {
    if (c->nesterov && c->momentum == 0.0)
        die_code(2, "--nesterov: needs a nonzero --momentum (torch.optim.SGD refuses nesterov without momentum)");
    if (c->ema_decay >= 1.0)
        die_code(2, "--ema_decay %g: must be below 1 (0: off)", c->ema_decay);
    if (c->label_smoothing >= 1.0)
        die_code(2, "--label_smoothing %g: must be below 1", c->label_smoothing);
    if (!strcmp(c->lr_schedule, "onecycle") && c->warmup_steps > 0)
        die_code(2, "--warmup_steps: --lr_schedule onecycle warms up by itself (--onecycle_pct_start)");
    if (!strcmp(c->lr_schedule, "onecycle") && c->min_lr != 0.0)
        die_code(2, "--min_lr: --lr_schedule onecycle ends at --lr / --onecycle_div_factor / --onecycle_final_div_factor");
}

static void setup(Run *r, int argc, char **argv) {
    char err[4800];
    if (world_init(&r->world, err, sizeof err) != 0) die("%s", err);
    g_die_quiet = r->world.boot.rank != 0;   /* every rank parses the same flags: say it once */
    config_init(&r->cfg);
    if (config_parse_args(&r->cfg, argc, argv) == CONFIG_VERSION) {
        version_print(stdout, g_progname);
        exit(0);
    }
    if (r->cfg.straggler_factor > 0.0 && r->cfg.straggler_factor <= 1.0)
        die_code(2, "--straggler_factor %g: must be 0 (off) or above 1", r->cfg.straggler_factor);
    check_recipe(&r->cfg);
    char job_dir[4096];   /* checked here, before any rank names a file after it */
    if (!r->cfg.job_dir[0] && bootstrap_default_job_dir(NULL, NULL, job_dir, sizeof job_dir, err, sizeof err) < 0) die("%s", err);
    g_die_quiet = 0;
    narrow_signal_handlers(signal_by_name(r->cfg.preempt_signal));

    choose_backend(r);
    if (connect_world(r, err, sizeof err) != 0) die("%s", err);
    r->comm = r->world.comm;
    /* Gradient buckets round ddptrain's ring (comm_mpi.c: MPI libraries send small rank counts'
     * all-reduces one direction at a time); small collectives stay with MPI's latency-minded
     * algorithms. Read by the MPI backend only. */
    if (!strcmp(r->cfg.comm_allreduce, "ring")) r->comm->ring_min_bytes = RING_MIN_BYTES;
    logger_init(&r->log, r->world.boot.rank, r->world.boot.world_size);

#ifdef _OPENMP
    omp_set_num_threads(choose_threads(r));
#endif
    propose_job_dir(r);

    /* Data first: a bad dataset fails before anything is written. */
    if (!strcmp(r->cfg.data_in_memory, "auto")) r->mem_budget = memory_budget(r, r->mem_how, sizeof r->mem_how);
    r->train_dl = open_split(r, "train", 1, -1, err, sizeof err);
    if (!r->train_dl) startup_fail(r, err);
    r->test_dl = open_split(r, "test", 0, -1, err, sizeof err);
    if (!r->test_dl) startup_fail(r, err);
    if (dataloader_num_batches(r->train_dl) < (size_t)r->cfg.grad_accum_steps) {
        snprintf(err, sizeof err,
                 "--data_dir %s: this rank's %zu training images are fewer than one optimizer step (batch_size %ld x grad_accum_steps %ld)",
                 r->cfg.data_dir, dataloader_num_samples(r->train_dl), r->cfg.batch_size, r->cfg.grad_accum_steps);
        startup_fail(r, err);
    }
    /* Rank 0 checks that it will be able to create the job directory, but creates it only
     * once every rank has passed start-up, so a failure anywhere leaves nothing behind. */
    if (r->world.boot.rank == 0 && job_dir_creatable(r->job_dir, err, sizeof err) != 0) startup_fail(r, err);
    if (world_startup_check(&r->world) != 0) world_startup_fail(&r->world, 1, NULL);
    /* From here on every rank is inside collectives: an error on one rank must end them all. */
    g_die_world = &r->world;
    g_die_hook = die_ends_job;
    preflight(r);
    share_job_dir(r);
    /* this start's own, so that a file left by another start never passes for it */
    int64_t token = (int64_t)(((uint64_t)getpid() << 32) ^ (uint64_t)(now_sec() * 1e6) ^ (uint64_t)time(NULL));
    comm_broadcast(r->comm, &token, sizeof token, 0);
    if (r->world.boot.rank == 0 && mkdir_p(r->job_dir) != 0)
        die("--job_dir %s: cannot create directory: %s", r->job_dir, strerror(errno));
    if (r->world.boot.rank == 0 && r->world.boot.world_size > 1 && write_job_dir_check(r, (uint64_t)token) != 0)
        die("%s/" JOBDIR_CHECK_FILE ": cannot write: %s", r->job_dir, strerror(errno));
    comm_set_context(r->comm, "waiting for rank 0 to create the job directory");
    comm_barrier(r->comm);
    if (r->world.boot.world_size > 1) check_job_dir_shared(r, (uint64_t)token);

    /* The job directory exists now (rank 0 made it; the check above ordered that). */
    if (logger_open(&r->log, r->job_dir, err, sizeof err) != 0) die("%s", err);
    if (flight_open(r->comm->flight, r->job_dir, r->hosts, err, sizeof err) != 0) die("%s", err);
    r->config_json = config_to_json(&r->cfg);
    if (r->world.boot.rank == 0) {
        remove_preempted_marker(r);
        char path[4200];
        snprintf_check(path, sizeof path, "%s/config.json", r->job_dir);
        if (write_file_atomic(path, r->config_json, strlen(r->config_json)) != 0)
            die("%s: cannot write: %s", path, strerror(errno));
        if (mkdir_p(r->ckpt_dir) != 0) die("%s: cannot create directory: %s", r->ckpt_dir, strerror(errno));
        int skipped = 0;
        if (!r->cfg.preflight && timeacct_open(&r->time, r->job_dir, &skipped, err, sizeof err) != 0)
            log_warn(&r->log, "%s; this run's time is not accounted", err);
        else if (skipped > 0)
            log_warn(&r->log, "%s: %d unreadable line%s dropped", r->time.path, skipped, skipped == 1 ? "" : "s");
    }
#ifdef _OPENMP
    int threads = omp_get_max_threads();
#else
    int threads = 1;
#endif
    log_info(&r->log, "ddptrain " PACKAGE_VERSION ": job dir %s", r->job_dir);
    log_info(&r->log, "%s", bootstrap_describe(&r->world.boot));
    log_info(&r->log, "%s", comm_describe(r->comm));
    if (r->be->on_device)
        log_info(&r->log, "device: %s GPU %d: %s; %s", r->be->name, r->gpu, r->be->describe(),
                 !r->cfg.use_amp ? "float32 training"
                 : !strcmp(r->cfg.amp_dtype, "fp16") ? "mixed precision fp16 with dynamic loss scaling, float32 master weights"
                 : "mixed precision bf16, float32 master weights");
    else
        log_info(&r->log, "device: cpu (%d threads per rank), %s, float32%s%s%s", threads, ops_cpu_describe(),
                 r->cfg.use_amp ? " (--use_amp applies to GPUs)" : "", r->device_note[0] ? "; " : "", r->device_note);
    agree_on_storage(r);
    /* Every rank logs what it reads into its own file; rank 0's line also reaches stdout. */
    log_info(&r->log, "data: %s: train %zu images on this rank of %zu (%s); test %zu of %zu", r->cfg.data_dir,
             dataloader_num_samples(r->train_dl), dataloader_global_samples(r->train_dl),
             dataloader_describe(r->train_dl), dataloader_num_samples(r->test_dl),
             dataloader_global_samples(r->test_dl));
    {
        char why[600] = "";
        if (!strcmp(r->cfg.data_in_memory, "auto")) {
            snprintf(why, sizeof why, "; --data_in_memory auto: %s", r->mem_how);
        } else {
            snprintf(why, sizeof why, "; --data_in_memory %s", r->cfg.data_in_memory);
        }
        log_info(&r->log, "data: train %s; test %s%s", dataloader_memory_note(r->train_dl), dataloader_memory_note(r->test_dl), why);
    }
    if (r->world.boot.rank == 0 && r->world.boot.world_size > 1)
        for (int q = 0; q < r->world.boot.world_size; q++) {
            char line[512];
            roster_line(r->roster, q, line, sizeof line);
            log_info(&r->log, "ranks: %s", line);
        }
}

/* --preflight: setup's checks have passed; measure the links (linktest.h), log the table and
 * the verdict. Returns the exit status, the same on every rank (they judge the same numbers). */
static int measure_links(Run *r) {
    const int world = r->world.boot.world_size, rank = r->world.boot.rank;
    const double t0 = now_sec();
    int status = 0;
    if (world == 1) {
        log_info(&r->log, "preflight: one rank: no links to measure");
    } else if (!r->comm->ops->sendrecv) {
        /* NCCL's point-to-point calls would need device buffers and streams of their own */
        log_warn(&r->log, "preflight: links not measured: the %s communicator has no point-to-point transfers in "
                 "ddptrain; --preflight --device cpu measures the network between the same hosts over MPI",
                 r->comm->ops->name);
    } else {
        LinkTest t;
        linktest_run(&t, r->comm, r->hosts);
        LinkVerdict v;
        linktest_judge(&v, t.mbps, world, t.shift);
        for (int q = 0; q < world && rank == 0; q++) {
            char line[512];
            linktest_line(&t, r->hosts, q, line, sizeof line);
            log_info(&r->log, "preflight: %s", line);
        }
        if (rank == 0)
            log_info(&r->log, "preflight: links: each rank to rank + %d, %d rounds of %.2f MB, median %.1f MB/s, %.1f s",
                     t.shift, t.rounds, (double)t.bytes / 1e6, v.median, t.seconds);
        for (int q = 0; q < world && rank == 0; q++) {
            const int from = (q - t.shift + world) % world;
            if (v.rank_slow[q])
                log_warn(&r->log, "preflight: rank %d on host %s: link %.1f MB/s, below half the median of %.1f MB/s", q,
                         r->hosts[q], v.rank_mbps[q], v.median);
            if (v.link_slow[q])
                log_warn(&r->log, "preflight: the link from rank %d on host %s to rank %d on host %s: %.1f MB/s, below "
                         "half the median of %.1f MB/s (the other links of both ranks are not)", from, r->hosts[from], q,
                         r->hosts[q], t.mbps[q], v.median);
        }
        status = v.n_ranks + v.n_links > 0 ? EXIT_PREFLIGHT_SLOW : 0;
        linktest_verdict_free(&v);
        linktest_free(&t);
    }
    log_info(&r->log, "preflight: %s; link test %.1f s, %.1f s since start; exiting without training (--preflight)",
             status ? "a slow link" : "all checks passed", now_sec() - t0, now_sec() - r->time.mono0);
    return status;
}

/* ---- the model, the optimizer and the plan of steps --------------------------------------- */

/* The model's tensors and the gradient buckets, the same on every rank: with another binary on
 * one node they could differ although every option agrees. */
static void agree_on_layout(Run *r) {
    Agreement a;
    agree_init(&a);
    uint64_t h = agree_hash(0, &r->model.num_params, sizeof r->model.num_params);
    h = agree_hash(h, &r->model.num_buffers, sizeof r->model.num_buffers);
    for (int i = 0; i < r->model.n_param_info; i++) {
        const TensorInfo *t = &r->model.param_info[i];
        h = agree_hash(h, t->name, strlen(t->name));
        h = agree_hash(h, &t->offset, sizeof t->offset);
        h = agree_hash(h, &t->numel, sizeof t->numel);
        h = agree_hash(h, t->shape, sizeof t->shape);
    }
    char v[48];
    snprintf(v, sizeof v, "%zu parameters", r->model.num_params);
    agree_add(&a, "the model's tensors", v, &h, sizeof h);
    h = 0;
    for (int k = 0; k < r->reducer.n_bucket; k++) {
        h = agree_hash(h, &r->reducer.bucket[k].begin, sizeof r->reducer.bucket[k].begin);
        h = agree_hash(h, &r->reducer.bucket[k].end, sizeof r->reducer.bucket[k].end);
    }
    snprintf(v, sizeof v, "%d buckets", r->reducer.n_bucket);
    agree_add(&a, "the gradient buckets", v, &h, sizeof h);
    require_agreement(r, &a);
}

/* Model, optimizer, loss scaler and reducer on the chosen backend, with rank 0's weights on
 * every rank, and the checkpoint writer. */
static void build_model(Run *r) {
    const Config *cfg = &r->cfg;
    const int world = r->world.boot.world_size;
    /* The model's activations are sized for the training batch only (model_evaluate chunks a
     * larger evaluation batch). */
    model_init_on(&r->model, r->be, (int)cfg->width, (int)cfg->blocks, (int)cfg->num_classes, (int)cfg->image_size,
                  (int)cfg->batch_size);
    model_init_weights(&r->model, (uint64_t)cfg->seed);
    r->model.label_smoothing = (float)cfg->label_smoothing;
    log_info(&r->log, "model: MiniResNet width %ld blocks %ld: %zu parameters", cfg->width, cfg->blocks,
             r->model.num_params);
    sgd_init_on(&r->opt, r->be, r->model.num_params, (float)cfg->momentum, (float)cfg->weight_decay);
    r->opt.nesterov = cfg->nesterov;
    const int groups = sgd_set_model_groups(&r->opt, &r->model, cfg->no_decay_1d, cfg->bn_bias_lr_mult);
    if (r->opt.group)
        log_info(&r->log, "optimizer: %d parameter ranges (%s%s%s)", groups, cfg->no_decay_1d ? "no weight decay on 1-D parameters" : "",
                 cfg->no_decay_1d && cfg->bn_bias_lr_mult != 1.0 ? ", " : "",
                 cfg->bn_bias_lr_mult != 1.0 ? "batch-norm biases at a multiple of the learning rate" : "");
    if (cfg->ema_decay > 0.0) {
        ema_init(&r->ema, &r->model, cfg->ema_decay);
        r->ema_host.params = mallocCheck(r->model.num_params * sizeof(float));
        r->ema_host.buffers = mallocCheck(r->model.num_buffers * sizeof(float));
        r->ema_host.nbt = callocCheck((size_t)model_bn_count(&r->model), sizeof(int64_t));
        log_info(&r->log, "EMA: weights and batch-norm buffers averaged with decay %g every %ld step%s (%s); evaluation "
                 "and checkpoints use the average", cfg->ema_decay, cfg->ema_every, cfg->ema_every == 1 ? "" : "s",
                 world > 1 ? "buffers averaged over the ranks first" : "one rank");
    }
    scaler_init(&r->scaler, r->be, r->be->on_device && cfg->use_amp && !strcmp(cfg->amp_dtype, "fp16"),
                SCALER_INIT_SCALE, SCALER_GROWTH, SCALER_BACKOFF, SCALER_INTERVAL);
    r->model.grad_scale = scaler_scale_ptr(&r->scaler);

    if (cfg->trace) {
        char path[4300];
        snprintf_check(path, sizeof path, "%s/trace-rank-%05d.json", r->job_dir, r->world.boot.rank);
        r->trace = trace_open(path, r->world.boot.rank);
    }
    size_t cap = cfg->bucket_cap_mb > 0 ? (size_t)(cfg->bucket_cap_mb * 1e6)
                                        : reducer_auto_cap(r->model.num_params * sizeof(float));
    reducer_init(&r->reducer, r->comm, r->model.grads, r->model.param_info, r->model.n_param_info,
                 cap, (size_t)(cfg->first_bucket_mb * 1e6), r->trace);
    if (strcmp(cfg->comm_dtype, "fp32") != 0) {
        /* The 16-bit conversion runs on the host; NCCL would need it on the device. */
        if (r->be->on_device) die("--comm_dtype %s: compressed all-reduce is for CPU ranks only; use fp32 on GPUs", cfg->comm_dtype);
        reducer_set_wire(&r->reducer, !strcmp(cfg->comm_dtype, "bf16") ? COMM_BF16 : COMM_FP16);
    }
    /* A device's collectives progress on their own (NCCL's kernels and proxy thread). Two
     * threads calling MPI, one at a time, need MPI_THREAD_SERIALIZED (2) at least. */
    if (world > 1 && !r->be->on_device && cfg->comm_progress_us > 0.0) {
        if (r->comm->thread_level >= 2) reducer_start_progress(&r->reducer, cfg->comm_progress_us);
        else log_warn(&r->log, "--comm_progress_us %g: the MPI library gives one thread only (thread level %d); buckets "
                      "are tested between layers only", cfg->comm_progress_us, r->comm->thread_level);
    }
    r->model.grad_ready = on_grad_ready;
    r->model.grad_ready_ctx = r;
    if (cfg->sync_bn && world > 1) {
        r->model.stats_allreduce = sync_bn_stats;
        r->model.stats_allreduce_ctx = r;
    }
    if (world > 1) {
        char desc[1024];
        reducer_describe(&r->reducer, desc, sizeof desc);
        char progress[64] = "";
        if (r->reducer.progress_on) snprintf(progress, sizeof progress, "; tested every %g us while backward runs", cfg->comm_progress_us);
        log_info(&r->log, "reducer: gradients averaged over %d ranks in %s%s%s%s%s", world, desc,
                 strcmp(cfg->comm_dtype, "fp32") ? ", sent as " : "", strcmp(cfg->comm_dtype, "fp32") ? cfg->comm_dtype : "",
                 cfg->sync_bn ? "; synchronised batch norm" : "", progress);
    }
    agree_on_layout(r);   /* before the first collective whose size they decide */
    broadcast_weights(r);
    checkpoint_writer_init(&r->writer, (int)cfg->keep_checkpoints);
}

/* Steps per epoch, the learning-rate schedule and the total: every rank takes the same number
 * of steps per epoch, the fewest any rank can fill, so uneven shards never leave a rank waiting
 * in a collective. */
static void plan_steps(Run *r) {
    const Config *cfg = &r->cfg;
    long mine = (long)dataloader_num_batches(r->train_dl) / cfg->grad_accum_steps;
    r->steps_per_epoch = allreduce_min_long(r->comm, mine);
    if (r->steps_per_epoch < mine)
        log_info(&r->log, "data: this rank could fill %ld steps per epoch; all ranks take %ld", mine, r->steps_per_epoch);
    /* --lr_ref_batch: the linear scaling rule (lr as given when the global batch is the reference) */
    const long global = cfg->batch_size * cfg->grad_accum_steps * r->world.boot.world_size;
    double lr = cfg->lr, min_lr = cfg->min_lr;
    if (cfg->lr_ref_batch > 0 && global != cfg->lr_ref_batch) {
        const double k = (double)global / (double)cfg->lr_ref_batch;
        lr *= k;
        min_lr *= k;
        log_info(&r->log, "lr: %g (--lr %g for a global batch of %ld, scaled linearly to this run's %ld)", lr, cfg->lr,
                 cfg->lr_ref_batch, global);
    }
    CHECK(schedule_init(&r->sched, cfg->lr_schedule, lr, min_lr, cfg->epochs, r->steps_per_epoch,
                        cfg->warmup_steps) == 0);
    r->total_steps = r->steps_per_epoch * cfg->epochs;
    if (cfg->max_steps > 0 && cfg->max_steps < r->total_steps) r->total_steps = cfg->max_steps;
    /* One cycle over the run's optimizer steps, --max_steps included, as OneCycleLR(total_steps) */
    r->sched.onecycle = (OneCycle){ .total_steps = r->total_steps, .pct_start = cfg->onecycle_pct_start,
                                    .div_factor = cfg->onecycle_div_factor,
                                    .final_div_factor = cfg->onecycle_final_div_factor,
                                    .anneal_linear = !strcmp(cfg->onecycle_anneal, "linear") };
    const char *why = schedule_onecycle_problem(&r->sched);
    if (why) {
        g_die_quiet = r->world.boot.rank != 0;
        die_code(2, "--lr_schedule onecycle over %ld steps: %s (change --onecycle_pct_start)", r->total_steps, why);
    }
}

/* Where training starts: a checkpoint's position, or the beginning. */
static void resume_or_start(Run *r) {
    const Config *cfg = &r->cfg;
    TrainState ts = {0};
    r->last_acc = -1.0;   /* no evaluation yet */
    r->best_acc = 0.0;
    const int resumed = maybe_resume(r, &ts);
    if (resumed) {   /* every rank read the file itself: a stale copy on one node shows here */
        Agreement a;
        agree_init(&a);
        const int64_t where[3] = {ts.epoch, ts.step_in_epoch, ts.global_step};
        char v[48];
        snprintf(v, sizeof v, "global step %ld", ts.global_step);
        agree_add(&a, "the resumed checkpoint's position", v, where, sizeof where);
        const uint64_t w = params_checksum(r);
        agree_add(&a, "the resumed checkpoint's weights", "", &w, sizeof w);
        require_agreement(r, &a);
    }
    r->step = resumed ? ts.global_step : 0;
    r->step_first = r->step;
    timeacct_resume_at(&r->time, r->step);
    if (r->time.on && r->time.redo_until > r->step)
        log_info(&r->log, "time: run %d of the job: steps %ld-%ld, which an earlier run reached, are done again", r->time.cur.run,
                 r->step + 1, r->time.redo_until);
    r->start_epoch = resumed ? ts.epoch : 0;
    r->start_step = resumed ? ts.step_in_epoch : 0;
    log_info(&r->log, "training: %ld epochs x %ld steps (batch %ld x accum %ld x %d ranks = %ld images per step), %ld steps in all%s",
             cfg->epochs, r->steps_per_epoch, cfg->batch_size, cfg->grad_accum_steps, r->world.boot.world_size,
             cfg->batch_size * cfg->grad_accum_steps * r->world.boot.world_size, r->total_steps,
             resumed ? ", resumed" : "");
}

/* Batch arrays on the host (the loader's) and, on a device, their device twins or the splits
 * held on the GPU. They hold either split's batches. */
static void alloc_batches(Run *r) {
    const Config *cfg = &r->cfg;
    const int max_batch = (int)(cfg->batch_size > cfg->eval_batch_size ? cfg->batch_size : cfg->eval_batch_size);
    const size_t img = (size_t)cfg->image_size * cfg->image_size * 3;
    r->x = alignedAllocCheck((size_t)max_batch * img * sizeof(float));
    r->y = mallocCheck((size_t)max_batch * sizeof(int));
    if (strcmp(cfg->tta, "none") != 0) {   /* the model's forwards take at most batch_size images */
        r->tta_x = alignedAllocCheck((size_t)cfg->batch_size * img * sizeof(float));
        r->tta_logits = mallocCheck((size_t)cfg->batch_size * cfg->num_classes * sizeof(float));
    }
    if (!r->be->on_device) return;
    r->dev_x = r->be->alloc((size_t)max_batch * img * sizeof(float));
    r->dev_y = r->be->alloc((size_t)max_batch * sizeof(int));
#ifdef HAVE_CUDA_BACKEND
    /* After the model's allocations, so the free-memory check sees what training needs. */
    char derr[512];
    /* A streamed split is never whole on the host: its batches are made there and uploaded,
     * as those of a split too large for the GPU. */
    if (dataloader_streaming(r->train_dl)) {
        r->train_dd = NULL;
        snprintf(derr, sizeof derr, "the training split is streamed from the shards (--data_in_memory)");
    } else {
        r->train_dd = r->cuda->device_data_open(r->train_dl, max_batch, derr, sizeof derr);
    }
    if (!r->train_dd) log_warn(&r->log, "data: training images stay on the host (uploaded per batch): %s", derr);
    if (r->train_dd && dataloader_streaming(r->test_dl))
        snprintf(derr, sizeof derr, "the test split is streamed from the shards (--data_in_memory)");
    r->test_dd = r->train_dd && !dataloader_streaming(r->test_dl) ? r->cuda->device_data_open(r->test_dl, max_batch, derr, sizeof derr) : NULL;
    if (r->train_dd && !r->test_dd) log_warn(&r->log, "data: test images stay on the host: %s", derr);
    if (r->train_dd)
        log_info(&r->log, "data: held on GPU %d (%.1f MiB%s); batches cropped, flipped and normalised there", r->gpu,
                 (double)(r->cuda->device_data_bytes(r->train_dd) + (r->test_dd ? r->cuda->device_data_bytes(r->test_dd) : 0)) / 1048576.0,
                 r->test_dd ? ", test split included" : "");
#endif
}

/* ---- the training loop ------------------------------------------------------------------- */

/* A step boundary: do all ranks agree to stop for preemption? On a GPU the collective waits for
 * the queued work, so ranks ask only every few steps; alone, a rank asks itself every step for
 * free. */
static int agree_to_stop(Run *r, long steps_into_epoch) {
    int64_t stop = g_signal != 0;
    if (r->world.boot.world_size == 1) return (int)stop;
    if (r->be->on_device && steps_into_epoch % PREEMPT_CHECK_STEPS_GPU != 0) return 0;
    comm_set_context(r->comm, "preemption check");
    comm_allreduce(r->comm, &stop, 1, COMM_INT64, COMM_SUM);
    return stop != 0;
}

/* One optimizer step: grad_accum_steps micro-batches forward and backward (only the last one
 * communicates, its buckets all-reduced while backward runs), the wait for the last buckets,
 * and the update (skipped by the fp16 scaler when a gradient overflowed). */
static void optimizer_step(Run *r, double lr) {
    const Config *cfg = &r->cfg;
    const double t_begin = now_sec();
    model_zero_grad(&r->model);
    for (long micro = 0; micro < cfg->grad_accum_steps; micro++) {
        double t0 = now_sec();
        const float *xb = NULL;
        const int *yb = NULL;
        int n = next_batch(r, r->train_dl, &xb, &yb);
        CHECK(n == cfg->batch_size);
        double t1 = now_sec();
        trace_event(r->trace, "data wait", "data", -1, 0, t0, t1);
        /* the loss stays with the model until the next log line */
        model_forward_train(&r->model, xb, yb, n, 1.0f / (float)cfg->grad_accum_steps);
        double t2 = now_sec();
        trace_event(r->trace, "forward", "compute", -1, 0, t1, t2);
        reducer_begin(&r->reducer, micro == cfg->grad_accum_steps - 1, r->step + 1);
        r->t_last_hook = t2;
        r->hook_layer = 0;
        model_backward(&r->model);
        trace_event(r->trace, "backward", "compute", -1, 0, t2, now_sec());
        r->win.images += n;
    }
    double t3 = now_sec();
    reducer_finish(&r->reducer);
    double t4 = now_sec();
    trace_event(r->trace, "gradient wait", "comm", -1, 0, t3, t4);
    scaler_unscale(&r->scaler, r->model.grads, r->model.num_params);
    sgd_step_unless(&r->opt, r->model.params, r->model.grads, lr, scaler_skip_flag(&r->scaler));
    scaler_update(&r->scaler);
    model_params_changed(&r->model);
    trace_event(r->trace, "optimizer", "optim", -1, 0, t4, now_sec());
    r->step++;
    r->win.steps++;
    r->win.data_wait += dataloader_take_wait_time(r->train_dl);
    r->win.step_time += now_sec() - t_begin;
}

/* AveragedModel.update_parameters after an optimizer step. The parameters are the same on
 * every rank; the buffers are the ranks' running statistics averaged as evaluation averages
 * them (buffers_average), so the average is the same on every rank too. */
static void ema_step(Run *r) {
    if (r->world.boot.world_size > 1) {
        reducer_drain(&r->reducer);
        buffers_average(r);
    }
    ema_update(&r->ema, &r->model);
    buffers_restore(r);
}

/* Every rank's times in the steps since the last progress line, one collective; rank 0 names a
 * straggler and its recovery (straggler.h) in the log and in metrics.jsonl. */
static void check_stragglers(Run *r) {
    const int world = r->world.boot.world_size;
    if (r->cfg.straggler_factor <= 0.0 || world == 1) return;
    StragglerTimes mine = {.data = r->win.data_wait, .comm = r->reducer.wait_time};
    mine.compute = r->win.step_time - mine.data - mine.comm;
    if (mine.compute < 0.0) mine.compute = 0.0;
    StragglerTimes *all = callocCheck((size_t)world, sizeof *all);
    straggler_exchange(r->comm, &mine, all);
    StragglerEvent ev[STRAGGLER_MAX_EVENTS];
    const int n = straggler_update(&r->straggler, all, r->step - r->win.steps + 1, r->step, ev, STRAGGLER_MAX_EVENTS);
    for (int i = 0; i < n && r->world.boot.rank == 0; i++) {
        char line[512];
        straggler_describe(&ev[i], r->hosts[ev[i].rank], line, sizeof line);
        log_warn(&r->log, "%s", line);
        straggler_json(&ev[i], r->hosts[ev[i].rank], r->step, line, sizeof line);
        logger_metrics(&r->log, line);
    }
    free(all);
}

/* A new log window: what the next progress line averages over. */
static void open_log_window(Run *r, double t) {
    r->win.t_start = t;
    r->win.images = 0;
    r->win.steps = 0;
    r->win.data_wait = 0.0;
    r->win.step_time = 0.0;
    r->reducer.wait_time = 0.0;
}

/* One progress line (rank 0's stdout and every rank's log) and one metrics record: the loss
 * and data wait averaged over the ranks since the last line. Ends the run when the loss
 * diverged. */
static void log_progress(Run *r, long epoch, double lr) {
    const Config *cfg = &r->cfg;
    const int world = r->world.boot.world_size;
    reducer_drain(&r->reducer);   /* before the loss is read back from the device */
    double t = now_sec();
    double stats[2] = {model_take_loss_sum(&r->model) / (double)(r->win.steps * cfg->grad_accum_steps),
                       r->win.data_wait};
    comm_set_context(r->comm, "loss for the log");
    comm_allreduce(r->comm, stats, 2, COMM_FLOAT64, COMM_AVG);
    /* the scaler's decisions are the same on every rank (scaler.h) */
    long skipped = scaler_take_skipped(&r->scaler);
    if (skipped > 0) {
        const double scale = scaler_get_scale(&r->scaler);
        log_info(&r->log, "step %ld: %ld of the last %ld steps skipped: fp16 gradients overflowed; loss scale now %g",
                 r->step, skipped, r->win.steps, scale);
        if (skipped == r->win.steps && scale < 1.0)
            die("step %ld: fp16 gradients overflow even with a loss scale of %g; training diverged (lower --lr, or --amp_dtype bf16?)",
                r->step, scale);
    }
    /* A step the scaler skipped may have an infinite loss: that is what it is for. */
    if (!isfinite(stats[0]) && skipped == 0) die("step %ld: loss is %f; training diverged (lower --lr?)", r->step, stats[0]);
    double dt = t - r->win.t_start, comm_wait = r->reducer.wait_time;
    check_stragglers(r);
    double ips = (double)r->win.images * world / dt;
    /* ETA from this invocation's average step time (evaluations included). */
    double eta = (t - r->t_train0) / (double)(r->step - r->step_first) * (double)(r->total_steps - r->step);
    long epochs = (r->total_steps + r->steps_per_epoch - 1) / r->steps_per_epoch;
    logger_progress(&r->log, epoch + 1, epochs, r->step, r->total_steps, stats[0], ips, eta,
                    "epoch %ld step %ld/%ld loss %.4f lr %.5f %.1f images/s (data %.0f%%, comm wait %.0f%%)",
                    epoch + 1, r->step, r->total_steps, stats[0], lr, ips, 100.0 * stats[1] / dt,
                    100.0 * comm_wait / dt);
    char line[640];
    snprintf_check(line, sizeof line,
                   "{\"epoch\": %ld, \"step\": %ld, \"loss\": %.6f, \"lr\": %.8g, \"images_per_sec\": %.2f, "
                   "\"data_sec\": %.4f, \"compute_sec\": %.4f, \"comm_wait_sec\": %.4f, \"time\": %.3f}",
                   epoch + 1, r->step, stats[0], lr, ips, stats[1], dt - stats[1] - comm_wait, comm_wait,
                   t - r->t_train0);
    logger_metrics(&r->log, line);
    if (timeacct_write(&r->time, r->step, TIMEACCT_DUE) != 0) log_warn(&r->log, "%s: cannot write: %s", r->time.path, strerror(errno));
    open_log_window(r, t);
}

/* Test accuracy and loss with the running statistics averaged over the ranks; one log line and
 * one metrics record. */
static void evaluate_and_log(Run *r, long epoch) {
    timeacct_enter(&r->time, TIME_EVAL);
    double t0 = now_sec(), test_loss;
    /* The average when there is one: the same on every rank, buffers included (ema_step). */
    const int ema = r->ema.be && r->ema.n_averaged > 0;
    if (ema) {
        reducer_drain(&r->reducer);
        ema_swap_in(&r->ema, &r->model);
    } else {
        buffers_average(r);
    }
    r->last_acc = evaluate(r, &test_loss);
    if (ema) ema_swap_out(&r->ema, &r->model);
    else buffers_restore(r);
    if (r->last_acc > r->best_acc) r->best_acc = r->last_acc;
    const char *which = !r->ema.be ? "" : ema ? " (EMA)" : " (EMA not updated yet: the trained weights)";
    const int tta = strcmp(r->cfg.tta, "none") != 0;
    log_info(&r->log, "epoch %ld step %ld test_acc %.4f test_loss %.4f%s%s%s%s (%.1f s)", epoch + 1, r->step, r->last_acc,
             test_loss, which, tta ? " (TTA " : "", tta ? r->cfg.tta : "", tta ? ")" : "", now_sec() - t0);
    char tta_json[64] = "";
    if (tta) snprintf_check(tta_json, sizeof tta_json, "\"tta\": \"%s\", ", r->cfg.tta);
    char line[512];
    snprintf_check(line, sizeof line,
                   "{\"epoch\": %ld, \"step\": %ld, \"lr\": %.8g, \"test_acc\": %.6f, \"test_loss\": %.6f, %s%s\"time\": %.3f}",
                   epoch + 1, r->step, schedule_lr(&r->sched, epoch, r->step > 0 ? r->step - 1 : 0), r->last_acc,
                   test_loss, ema ? "\"ema\": true, " : "", tta_json, now_sec() - r->t_train0);
    logger_metrics(&r->log, line);
    r->eval_step = r->step;
    /* MLPerf's rule: the time to train ends with the evaluation that reaches the target (every
     * rank sees the same accuracy, so every rank stops at the same step) */
    if (r->cfg.target_accuracy > 0.0 && !r->target_reached && r->last_acc >= r->cfg.target_accuracy) {
        r->target_reached = 1;
        r->target_time = now_sec() - r->t_train0;
        r->target_step = r->step;
        r->target_epoch = epoch + 1;
        log_info(&r->log, "target_accuracy %g reached: test_acc %.4f at step %ld (epoch %ld), %.1f s after the start "
                 "of training; stopping", r->cfg.target_accuracy, r->last_acc, r->step, epoch + 1, r->target_time);
    }
    back_to_training(r);
}

/* The end of an epoch (or of the run, mid-epoch on --max_steps): evaluate when due, then
 * checkpoint when due. An epoch-boundary checkpoint records the NEXT epoch at step 0; a run
 * that stopped mid-epoch records where it stopped. */
static void end_epoch(Run *r, long epoch, long steps_done_in_epoch, int done) {
    const Config *cfg = &r->cfg;
    const int last_epoch = done || epoch + 1 == cfg->epochs;
    /* --target_accuracy evaluates every epoch; nothing twice at the same step */
    if (((cfg->eval_every > 0 && (epoch + 1) % cfg->eval_every == 0) || last_epoch || cfg->target_accuracy > 0.0) &&
        r->eval_step != r->step)
        evaluate_and_log(r, epoch);
    const int mid = steps_done_in_epoch < r->steps_per_epoch;
    if (last_epoch || r->target_reached || (cfg->save_every > 0 && (epoch + 1) % cfg->save_every == 0))
        save_checkpoint(r, mid ? epoch : epoch + 1, mid ? steps_done_in_epoch : 0, r->step, 0);
}

/* Epochs of steps from the resume position to the end, or to a preemption. Returns 1 when the
 * run stopped for preemption (its checkpoint written). */
static int train(Run *r) {
    const Config *cfg = &r->cfg;
    int done = r->step >= r->total_steps;
    r->t_train0 = now_sec();
    r->eval_step = -1;
    back_to_training(r);
    if (done) {
        /* Resumed from the run's end: nothing to train, so the checkpoint is evaluated, with
         * this run's evaluation options (--tta, --ema_decay 0 for the trained weights). */
        log_info(&r->log, "training: the checkpoint is at the run's last step; evaluating it");
        evaluate_and_log(r, r->start_step > 0 || r->start_epoch == 0 ? r->start_epoch : r->start_epoch - 1);
        return 0;
    }
    for (long epoch = r->start_epoch; epoch < cfg->epochs && !done && !r->target_reached; epoch++) {
        const long s0 = epoch == r->start_epoch ? r->start_step : 0;
        dataloader_start_epoch(r->train_dl, (int)epoch, (size_t)(s0 * cfg->grad_accum_steps));
        model_take_loss_sum(&r->model);   /* a log window does not span epochs */
        open_log_window(r, now_sec());
        long s_done = s0;   /* optimizer steps completed in this epoch */
        for (long s = s0; s < r->steps_per_epoch; s++) {
            if (agree_to_stop(r, s - s0)) {
                log_info(&r->log, "preemption: signal received (%s); checkpointing at epoch %ld step %ld and exiting with status %d",
                         g_signal ? strsignal(g_signal) : "on another rank", epoch + 1, r->step, EXIT_PREEMPTED);
                save_checkpoint(r, epoch, s, r->step, 1);
                reducer_drain(&r->reducer);
                return 1;
            }
            const double lr = schedule_lr(&r->sched, epoch, r->step);
            optimizer_step(r, lr);
            if (r->ema.be && r->step % cfg->ema_every == 0) ema_step(r);
            timeacct_step(&r->time, r->step);
            s_done = s + 1;
            if (r->step % cfg->log_interval == 0 || r->step == r->total_steps) log_progress(r, epoch, lr);
            if (cfg->eval_every_steps > 0 && r->step % cfg->eval_every_steps == 0) {
                reducer_drain(&r->reducer);
                evaluate_and_log(r, epoch);
            }
            done = r->step >= r->total_steps || r->target_reached;
            if (cfg->save_every_steps > 0 && r->step % cfg->save_every_steps == 0 && !done && s + 1 < r->steps_per_epoch)
                save_checkpoint(r, epoch, s + 1, r->step, 0);
            if (done) break;
        }
        reducer_drain(&r->reducer);
        end_epoch(r, epoch, s_done, done);
    }
    return 0;
}

/* --target_accuracy's outcome: the run's last line and a metrics.jsonl event record. */
static void report_target(Run *r) {
    const double startup = r->t_train0 - r->t_proc0;
    char line[512];
    if (r->target_reached) {
        log_info(&r->log, "time to train: %.3f s to test_acc %.4f >= target_accuracy %g at step %ld (epoch %ld); "
                 "start-up %.3f s apart", r->target_time, r->last_acc, r->cfg.target_accuracy, r->target_step,
                 r->target_epoch, startup);
        snprintf_check(line, sizeof line,
                       "{\"event\": \"target_accuracy\", \"reached\": true, \"target\": %.6g, \"accuracy\": %.6f, "
                       "\"step\": %ld, \"epoch\": %ld, \"time_to_train\": %.3f, \"startup\": %.3f}",
                       r->cfg.target_accuracy, r->last_acc, r->target_step, r->target_epoch, r->target_time, startup);
    } else {
        log_info(&r->log, "target_accuracy %g not reached: best test_acc %.4f in %ld steps (%.3f s of training; start-up "
                 "%.3f s apart); exit status %d", r->cfg.target_accuracy, r->best_acc, r->step,
                 now_sec() - r->t_train0, startup, EXIT_TARGET_MISSED);
        snprintf_check(line, sizeof line,
                       "{\"event\": \"target_accuracy\", \"reached\": false, \"target\": %.6g, \"best_accuracy\": %.6f, "
                       "\"step\": %ld, \"train_time\": %.3f, \"startup\": %.3f}",
                       r->cfg.target_accuracy, r->best_acc, r->step, now_sec() - r->t_train0, startup);
    }
    logger_metrics(&r->log, line);
}

/* The last checkpoint on disk, the closing line, and, after a preemption, every rank waiting
 * for rank 0's file before anyone exits. */
static void finish(Run *r, int preempted) {
    char err[1200];
    const int rank = r->world.boot.rank;
    timeacct_enter(&r->time, TIME_CHECKPOINT);
    if (rank == 0 && checkpoint_writer_wait(&r->writer, err, sizeof err) != 0)
        log_warn(&r->log, "checkpoint: write failed: %s", err);
    timeacct_enter(&r->time, TIME_SHUTDOWN);
    if (preempted) {
        if (rank == 0) write_preempted_marker(r, r->step);
        /* The others wait here while rank 0 finishes writing: however slow the file system,
         * that must not end the job through the communication timeout. */
        comm_set_context(r->comm, "waiting for the preemption checkpoint");
        comm_set_timeout(r->comm, 0);
        comm_barrier(r->comm);
    } else {
        log_info(&r->log, "done: %ld steps in %.1f s, final test_acc %.4f (best %.4f)", r->step,
                 now_sec() - r->t_train0, r->last_acc, r->best_acc);
    }
    if (r->trace && trace_close(r->trace) != 0) log_warn(&r->log, "trace: cannot write: %s", strerror(errno));
    /* the run's last line: where the job's wall time went, this run and the earlier ones */
    if (rank == 0) {
        if (r->time.on && timeacct_close(&r->time, r->step, preempted ? "preempted" : "done") != 0)
            log_warn(&r->log, "%s: cannot write: %s", r->time.path, strerror(errno));
        char line[512];
        timeacct_summary(&r->time, line, sizeof line);
        log_info(&r->log, "%s", line);
    }
    if (!preempted && r->cfg.target_accuracy > 0.0) report_target(r);
}

/* What setup made, in the reverse order; the world last (communicator, MPI, PMIx). */
static void teardown_setup(Run *r) {
    straggler_free(&r->straggler);
    free(r->roster);
    free(r->hosts);
    dataloader_free(r->train_dl);
    dataloader_free(r->test_dl);
    timeacct_free(&r->time);
    logger_close(&r->log);
    free(r->config_json);
    config_free(&r->cfg);
    world_free(&r->world);
}

/* Everything in the reverse order of its making. */
static void teardown(Run *r) {
    checkpoint_writer_free(&r->writer);
    free(r->x);
    free(r->y);
    free(r->tta_x);
    free(r->tta_logits);
    if (r->be->on_device) {
#ifdef HAVE_CUDA_BACKEND
        r->cuda->device_data_free(r->train_dd);
        r->cuda->device_data_free(r->test_dd);
#endif
        r->be->release(r->dev_x);
        r->be->release(r->dev_y);
    }
    if (r->own_buffers) r->be->release(r->own_buffers);
    reducer_free(&r->reducer);
    sgd_free(&r->opt);
    ema_free(&r->ema);
    free(r->ema_host.params);
    free(r->ema_host.buffers);
    free(r->ema_host.nbt);
    scaler_free(&r->scaler);
    model_free(&r->model);
    teardown_setup(r);
}

int main(int argc, char **argv) {
    static Run run;
    Run *r = &run;
    timeacct_init(&r->time);   /* the run's wall time starts here */
    r->t_proc0 = now_sec();
    install_signal_handlers();
    /* Job directories, logs and checkpoints follow the user's umask but are never
     * world-writable, whatever the umask. */
    umask(umask(0) | S_IWOTH);
    g_progname = "ddptrain";
    setup(r, argc, argv);
    if (r->cfg.preflight) {
        const int status = measure_links(r);
        teardown_setup(r);
        return status;
    }
    build_model(r);
    plan_steps(r);
    resume_or_start(r);
    alloc_batches(r);
    const int preempted = train(r);
    finish(r, preempted);
    const int missed = !preempted && r->cfg.target_accuracy > 0.0 && !r->target_reached;
    teardown(r);
    return preempted ? EXIT_PREEMPTED : missed ? EXIT_TARGET_MISSED : 0;
}
