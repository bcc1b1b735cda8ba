/* SPDX-License-Identifier: BSD-3-Clause */
/* train.c - ddptrain: data-parallel training of a convolutional network.
 *
 * main() reads as the algorithm: setup (signals, the world of ranks, flags, device, data,
 * preflight checks, job directory and logs) -> build (the Learner: model, optimizer, EMA,
 * scaler; the reducer; rank 0's weights everywhere) -> plan_steps -> resume_or_start ->
 * train: per epoch { per step { agree_to_stop?, optimizer_step (batches, forward, backward
 * with buckets all-reduced while it runs, update), a progress line when due, a checkpoint when
 * due }, end_epoch (evaluate, checkpoint) } -> finish -> teardown. Each policy lives in a file
 * of its own (docs/internals.md): this file wires them and runs the loop. */
#include "build_config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "run/batches.h"
#include "run/ckpt_policy.h"
#include "dist/comm.h"
#include "base/config.h"
#include "device/cpu_amp.h"
#include "device/device.h"
#include "run/eval.h"
#include "dist/flight.h"
#include "run/jobdir.h"
#include "run/jobdir_lock.h"
#include "run/learner.h"
#include "run/memory_check.h"
#include "base/logger.h"
#include "model/netfile.h"
#include "base/preempt.h"
#include "run/preflight.h"
#include "run/progress.h"
#include "dist/reducer.h"
#include "run/replica.h"
#include "model/schedule.h"
#include "run/splits.h"
#include "base/timeacct.h"
#include "base/trace.h"
#include "base/util.h"
#include "run/version.h"
#include "run/whitening.h"
#include "dist/world.h"

/* Steps between preemption checks of several ranks on GPUs (each check is a host round trip). */
#define PREEMPT_CHECK_STEPS_GPU 10
/* --comm_allreduce ring: all-reduces of at least this many bytes go round the ring */
#define RING_MIN_BYTES (32 * 1024)

/* ---- the run's context -------------------------------------------------------------------- */

typedef struct {
    Config cfg;
    World world;             /* the process group: bootstrap, MPI, the communicator */
    Comm *comm;              /* world.comm */
    Device dev;              /* the backend this rank trains on */
    Logger log;
    JobDir job;
    char *config_json;
    Splits data;             /* this rank's shares of the training and test splits */
    Ranks ranks;             /* every rank's host and device (preflight.h) */
    NetSpec net;             /* the network --model names, checked with the flags */
    RunMemory mem;           /* its estimated peak memory (memory_check.h) */
    Learner learner;         /* model, optimizer, EMA, loss scaler */
    Replica replica;         /* what is kept equal across the ranks' replicas */
    Reducer reducer;
    Trace *trace;
    CkptPolicy ckpt;
    Batches batches;
    Evaluator eval;
    Progress progress;
    Schedule sched;
    TimeAcct time;           /* where the wall time goes; rank 0 keeps time.jsonl (timeacct.h) */
    long steps_per_epoch, total_steps;
    /* where training is */
    long step, step_first;   /* global step now, and where this invocation began */
    long start_epoch, start_step;
    double t_train0;
    double t_proc0;          /* the process's start: start-up is t_train0 - t_proc0 */
} Run;

/* A rank's failure before training: print it, and make every rank exit (world.h's rule); the
 * lowest healthy rank repeats the reason for the job's output. */
static void startup_fail(Run *r, const char *msg) {
    fflush(stdout);
    char line[4 * 4800];   /* a control character left in a name shown as die() shows it: one line */
    one_line(line, sizeof line, msg);
    if (r->world.boot.world_size > 1) fprintf(stderr, "%s: error: rank %d: %s\n", g_progname, r->world.boot.rank, line);
    else fprintf(stderr, "%s: error: %s\n", g_progname, line);
    fflush(stderr);
    world_startup_fail(&r->world, 1, msg);
}

static World *g_die_world;

/* die() after start-up: every rank is inside collectives, so one rank's error ends them all. */
static void die_ends_job(int code) {
    jobdir_lock_release();   /* MPI_Abort may end this process without running atexit */
    if (g_die_world && g_die_world->boot.world_size > 1) world_abort_job(g_die_world, code);
}

/* Back to training after an evaluation or a checkpoint, and a record of it in time.jsonl: a
 * run killed later is then accounted from its last phase change (timeacct.h). */
static void back_to_training(Run *r) {
    timeacct_train(&r->time, r->step);
    if (timeacct_write(&r->time, r->step, TIMEACCT_PHASE) != 0)
        log_warn(&r->log, "%s: cannot write: %s", r->time.path, strerror(errno));
}

/* ---- setup ------------------------------------------------------------------------------- */

/* The flags; exits for --help and --version and on a bad flag, before any collective. */
static void read_flags(Run *r, int argc, char **argv) {
    char err[4800];
    g_die_quiet = r->world.boot.rank != 0;   /* every rank parses the same flags: say it once */
    config_init(&r->cfg);
    if (config_parse_args(&r->cfg, argc, argv) == CONFIG_VERSION) {
        version_print(stdout, g_progname);
        exit(0);
    }
    if (config_check_recipe(&r->cfg, err, sizeof err) != 0) die_code(2, "%s", err);
    if (learner_network(&r->cfg, &r->net, err, sizeof err) != 0) die_code(2, "%s", err);
    if (!r->cfg.print_model && learner_check_init_from(&r->cfg, &r->net, err, sizeof err) != 0) die_code(2, "%s", err);
    if (r->cfg.print_model) {
        if (r->world.boot.rank == 0) netfile_write(stdout, &r->net);
        exit(0);
    }
    char job_dir[4096];   /* checked here, before any rank names a file after it */
    if (!r->cfg.job_dir[0] && bootstrap_default_job_dir(NULL, NULL, job_dir, sizeof job_dir, err, sizeof err) < 0)
        die("%s", err);
    g_die_quiet = 0;
    preempt_narrow(r->cfg.preempt_signal);
}

/* The job directory, made once every rank has passed start-up, then the logs in it,
 * config.json and the time account. */
static void open_job_dir(Run *r) {
    char err[4800];
    jobdir_create(&r->job, r->comm, r->ranks.hosts);
    /* The job directory exists now (rank 0 made it; jobdir_create ordered that). */
    if (logger_open(&r->log, r->job.path, err, sizeof err) != 0) die("%s", err);
    if (r->cfg.tensorboard && !r->cfg.preflight && logger_open_tensorboard(&r->log, r->job.path, err, sizeof err) != 0)
        die("%s", err);
    if (flight_open(r->comm->flight, r->job.path, r->ranks.hosts, err, sizeof err) != 0) die("%s", err);
    r->config_json = config_to_json(&r->cfg);
    if (r->world.boot.rank != 0) return;
    jobdir_clear_preempted(&r->job);
    jobdir_write_config(&r->job, r->config_json);
    int skipped = 0;
    if (!r->cfg.preflight && timeacct_open(&r->time, r->job.path, &skipped, err, sizeof err) != 0)
        log_warn(&r->log, "%s; this run's time is not accounted", err);
    else if (skipped > 0)
        log_warn(&r->log, "%s: %d unreadable line%s dropped", r->time.path, skipped, skipped == 1 ? "" : "s");
}

static void setup(Run *r, int argc, char **argv) {
    char err[4800];
    if (world_init(&r->world, err, sizeof err) != 0) die("%s", err);
    read_flags(r, argc, argv);
    device_choose(&r->dev, &r->cfg, &r->world.boot);
    if (device_connect(&r->dev, &r->world, &r->cfg, err, sizeof err) != 0) die("%s", err);
    r->comm = r->world.comm;
    /* Gradient buckets round ddptrain's ring (comm_mpi.c: MPI libraries send small rank counts'
     * all-reduces one direction at a time); small collectives stay with MPI's latency-minded
     * algorithms. Read by the MPI backend only. */
    if (!strcmp(r->cfg.comm_allreduce, "ring")) r->comm->ring_min_bytes = RING_MIN_BYTES;
    logger_init(&r->log, r->world.boot.rank, r->world.boot.world_size);
#ifdef _OPENMP
    omp_set_num_threads(device_threads(&r->cfg, &r->world.boot));
#endif
    jobdir_propose(&r->job, &r->cfg, r->world.boot.rank);

    /* Data first: a bad dataset fails before anything is written. */
    if (splits_open(&r->data, &r->cfg, &r->world.boot, err, sizeof err) != 0) startup_fail(r, err);
    /* Then the memory: a run that cannot fit on its node fails before anything is allocated
     * for the model or written (memory_check.h). */
    if (memory_check(&r->mem, &r->cfg, &r->net, r->dev.be, r->world.boot.rank, r->world.boot.local_size, err,
                     sizeof err) != 0)
        startup_fail(r, err);
    /* Rank 0 checks that it will be able to create the job directory, but creates it only
     * once every rank has passed start-up, so a failure anywhere leaves nothing behind. */
    if (r->world.boot.rank == 0 && jobdir_creatable(r->job.path, err, sizeof err) != 0) startup_fail(r, err);
    /* ... and that no other run uses it, nor a link in it leads elsewhere (jobdir.h). */
    if (r->world.boot.rank == 0 && jobdir_check_existing(r->job.path, err, sizeof err) != 0) startup_fail(r, err);
    if (world_startup_check(&r->world) != 0) world_startup_fail(&r->world, 1, NULL);
    /* From here on every rank is inside collectives: an error on one rank must end them all. */
    g_die_world = &r->world;
    g_die_hook = die_ends_job;
    preflight_check(&r->ranks, r->comm, &r->world.boot, r->dev.gpu, &r->cfg, r->data.train, r->data.test);
    progress_init(&r->progress, &r->cfg, r->comm, &r->log, &r->time, r->ranks.hosts);
    open_job_dir(r);

    char line[1600];
    log_info(&r->log, "ddptrain " PACKAGE_VERSION ": job dir %s", QUOTED(r->job.path));
    if (r->job.lock_note[0]) log_info(&r->log, "%s", r->job.lock_note);
    log_info(&r->log, "%s", bootstrap_describe(&r->world.boot));
    log_info(&r->log, "%s", comm_describe(r->comm));
#ifdef _OPENMP
    device_describe(&r->dev, &r->cfg, omp_get_max_threads(), line, sizeof line);
#else
    device_describe(&r->dev, &r->cfg, 1, line, sizeof line);
#endif
    log_info(&r->log, "device: %s", line);
    splits_agree_on_storage(&r->data, r->comm, &r->log);
    splits_log(&r->data, &r->log);
    preflight_log_ranks(&r->ranks, &r->log);
}

/* ---- the learner, the reducer and the plan of steps --------------------------------------- */

/* The reducer over the model's gradients, its progress thread, and the model's hooks into it. */
static void build_reducer(Run *r) {
    const Config *cfg = &r->cfg;
    Model *m = &r->learner.model;
    const int world = r->world.boot.world_size;
    size_t cap = cfg->bucket_cap_mb > 0 ? (size_t)(cfg->bucket_cap_mb * 1e6) : reducer_auto_cap(m->num_params * sizeof(float));
    reducer_init(&r->reducer, r->comm, m->grads, m->param_info, m->n_param_info, cap, (size_t)(cfg->first_bucket_mb * 1e6),
                 r->trace);
    if (strcmp(cfg->comm_dtype, "fp32") != 0) {
        /* a GPU refused it at start-up (gpu_refusals.c) */
        reducer_set_wire(&r->reducer, !strcmp(cfg->comm_dtype, "bf16") ? COMM_BF16 : COMM_FP16);
    }
    /* A device's collectives progress on their own (NCCL's kernels and proxy thread). Two
     * threads calling MPI, one at a time, need MPI_THREAD_SERIALIZED (2) at least. */
    if (world > 1 && !r->dev.be->on_device && cfg->comm_progress_us > 0.0) {
        if (r->comm->thread_level >= 2) reducer_start_progress(&r->reducer, cfg->comm_progress_us);
        else log_warn(&r->log, "--comm_progress_us %g: the MPI library gives one thread only (thread level %d); buckets "
                      "are tested between layers only", cfg->comm_progress_us, r->comm->thread_level);
    }
    m->grad_ready = reducer_grad_ready;
    m->grad_ready_ctx = &r->reducer;
    if (cfg->sync_bn && world > 1) {
        m->stats_allreduce = reducer_stats_allreduce;
        m->stats_allreduce_ctx = &r->reducer;
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
}

/* The learner and the reducer on the chosen backend, with rank 0's weights on every rank, and
 * the checkpoint policy. */
static void build(Run *r) {
    learner_init(&r->learner, &r->cfg, &r->net, r->dev.be, r->world.boot.world_size, r->mem.total, &r->log);
    if (!r->dev.be->on_device) cpu_amp_log_convs(&r->learner.model, r->cfg.batch_size, &r->log);
    char mem[600];
    memory_describe(&r->mem, mem, sizeof mem);
    log_info(&r->log, "memory: %s", mem);
    if (r->cfg.trace) {
        char path[4300];
        snprintf_check(path, sizeof path, "%s/trace-rank-%05d.json", r->job.path, r->world.boot.rank);
        r->trace = trace_open(path, r->world.boot.rank);
    }
    build_reducer(r);
    preflight_agree_layout(r->comm, r->ranks.hosts, &r->learner.model, &r->reducer);
    replica_init(&r->replica, r->comm, &r->learner.model);
    replica_broadcast_weights(&r->replica, &r->log);
    ckpt_policy_init(&r->ckpt, &r->cfg, r->comm, &r->log, r->ranks.hosts, r->job.ckpt_dir, r->config_json);
    ckpt_policy_set_dataset(&r->ckpt, r->data.test);
}

/* Steps per epoch, the learning-rate schedule and the total: every rank takes the same number
 * of steps per epoch, the fewest any rank can fill, so uneven shards never leave a rank waiting
 * in a collective. */
static void plan_steps(Run *r) {
    const Config *cfg = &r->cfg;
    long mine = (long)dataloader_num_batches(r->data.train) / cfg->grad_accum_steps;
    r->steps_per_epoch = comm_min_long(r->comm, mine);
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
    CHECK(schedule_init(&r->sched, cfg->lr_schedule, lr, min_lr, cfg->epochs, r->steps_per_epoch, cfg->warmup_steps) == 0);
    long milestones[SCHED_MAX_MILESTONES];
    const int n_milestones = config_lr_milestones(cfg, milestones, SCHED_MAX_MILESTONES);
    CHECK(n_milestones >= 0);   /* config_check_recipe refused it before */
    schedule_set_epochwise(&r->sched, cfg->lr_step_size, cfg->lr_gamma, milestones, n_milestones, cfg->lr_warmup_epochs,
                           !strcmp(cfg->lr_warmup_method, "constant"), cfg->lr_warmup_decay);
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
        die_code(2, "--lr_schedule %s over %ld steps: %s (change --onecycle_pct_start)", cfg->lr_schedule, r->total_steps, why);
    }
}

/* Where training starts: a checkpoint's position (ckpt_policy.h), or the beginning. */
static void resume_or_start(Run *r) {
    const Config *cfg = &r->cfg;
    TrainState ts = {0};
    const int resumed = ckpt_policy_resume(&r->ckpt, &r->learner, &r->replica, &r->data, &ts);
    r->step = resumed ? ts.global_step : 0;
    r->step_first = r->step;
    timeacct_resume_at(&r->time, r->step);
    if (r->time.on && r->time.redo_until > r->step)
        log_info(&r->log, "time: run %d of the job: steps %ld-%ld, which an earlier run reached, are done again", r->time.cur.run,
                 r->step + 1, r->time.redo_until);
    r->start_epoch = resumed ? ts.epoch : 0;
    r->start_step = resumed ? ts.step_in_epoch : 0;
    /* a run's first start: the whitening from the data, then Lookahead's slow copy of it all (a
     * checkpoint holds both) */
    if (!resumed && !cfg->init_from[0]) whitening_init(&r->learner, r->data.train, r->comm, cfg, &r->log);
    if (r->learner.lookahead && r->learner.ema.n_averaged == 0) learner_lookahead_start(&r->learner);
    log_info(&r->log, "training: %ld epochs x %ld steps (batch %ld x accum %ld x %d ranks = %ld images per step), %ld steps in all%s",
             cfg->epochs, r->steps_per_epoch, cfg->batch_size, cfg->grad_accum_steps, r->world.boot.world_size,
             cfg->batch_size * cfg->grad_accum_steps * r->world.boot.world_size, r->total_steps,
             resumed ? ", resumed" : "");
}

/* The batches' arrays (after the model's allocations: batches.h) and the evaluator over them. */
static void prepare_batches(Run *r) {
    const Config *cfg = &r->cfg;
    const int max_batch = (int)(cfg->batch_size > cfg->eval_batch_size ? cfg->batch_size : cfg->eval_batch_size);
    batches_init(&r->batches, &r->dev, r->data.train, r->data.test, (int)config_input_size(cfg),
                 (int)config_eval_size(cfg), max_batch, &r->log);
    eval_init(&r->eval, cfg, r->comm, &r->log, &r->batches, &r->net, r->dev.be, r->job.path);
}

/* ---- the training loop ------------------------------------------------------------------- */

/* A step boundary: do all ranks agree to stop for preemption? On a GPU the collective waits for
 * the queued work, so ranks ask only every few steps; alone, a rank asks itself every step for
 * free. */
static int agree_to_stop(Run *r, long steps_into_epoch) {
    int64_t stop = preempt_received() != 0;
    if (r->world.boot.world_size == 1) return (int)stop;
    if (r->dev.be->on_device && steps_into_epoch % PREEMPT_CHECK_STEPS_GPU != 0) return 0;
    comm_set_context(r->comm, "preemption check");
    comm_allreduce(r->comm, &stop, 1, COMM_INT64, COMM_SUM);
    return stop != 0;
}

/* One optimizer step: grad_accum_steps micro-batches forward and backward (only the last one
 * communicates, its buckets all-reduced while backward runs), the wait for the last buckets,
 * and the update. */
static void optimizer_step(Run *r, double lr) {
    const Config *cfg = &r->cfg;
    Model *m = &r->learner.model;
    const double t_begin = now_sec();
    model_zero_grad(m);
    for (long micro = 0; micro < cfg->grad_accum_steps; micro++) {
        double t0 = now_sec();
        const float *xb = NULL;
        const int *yb = NULL;
        int n = batches_next(&r->batches, BATCH_TRAIN, &xb, &yb);
        CHECK(n == cfg->batch_size);
        double t1 = now_sec();
        trace_event(r->trace, "data wait", "data", -1, 0, t0, t1);
        /* dropout's draws: a function of (seed, step, rank, micro-batch), so a resume redraws them */
        model_set_noise(m, (uint64_t)cfg->seed, (uint64_t)r->step, r->world.boot.rank, (int)micro);
        /* mixup and cutmix: the weight of the batch's own labels in its targets */
        m->mix = (float)dataloader_batch_lambda(r->data.train);
        /* the loss stays with the model until the next log line */
        model_forward_train(m, xb, yb, n, 1.0f / (float)cfg->grad_accum_steps);
        double t2 = now_sec();
        trace_event(r->trace, "forward", "compute", -1, 0, t1, t2);
        reducer_begin(&r->reducer, micro == cfg->grad_accum_steps - 1, r->step + 1);
        model_backward(m);
        trace_event(r->trace, "backward", "compute", -1, 0, t2, now_sec());
        r->progress.images += n;
    }
    double t3 = now_sec();
    reducer_finish(&r->reducer);
    double t4 = now_sec();
    trace_event(r->trace, "gradient wait", "comm", -1, 0, t3, t4);
    learner_update(&r->learner, lr);
    trace_event(r->trace, "optimizer", "optim", -1, 0, t4, now_sec());
    r->step++;
    r->progress.steps++;
    r->progress.data_wait += dataloader_take_wait_time(r->data.train);
    r->progress.step_time += now_sec() - t_begin;
}

/* airbench's Lookahead after an optimizer step: a pull every --lookahead_every steps, and at the
 * run's last step the weights set to the slow copy. The buffers are pulled as the ranks'
 * average (as ema_step averages them), so the slow copy is the same on every rank. */
static void lookahead_step(Run *r) {
    Learner *l = &r->learner;
    const int every = r->step % l->lookahead_every == 0, last = r->step >= r->total_steps;
    if (!every && !last) return;
    if (r->world.boot.world_size > 1) {
        reducer_drain(&r->reducer);
        replica_buffers_average(&r->replica);
    }
    if (every) learner_lookahead_pull(l, learner_lookahead_decay(l, r->step, r->total_steps));
    if (last) learner_lookahead_pull(l, 1.0);
    /* the model's buffers are the slow copy's now: the rank's own are not restored */
}

/* AveragedModel.update_parameters after an optimizer step. The parameters are the same on
 * every rank; the buffers are the ranks' running statistics averaged as evaluation averages
 * them (replica.h), so the average is the same on every rank too. */
static void ema_step(Run *r) {
    if (r->world.boot.world_size > 1) {
        reducer_drain(&r->reducer);
        replica_buffers_average(&r->replica);
    }
    ema_update(&r->learner.ema, &r->learner.model);
    replica_buffers_restore(&r->replica);
}

static void log_progress(Run *r, long epoch, double lr) {
    const ProgressAt at = {.epoch = epoch, .step = r->step, .total_steps = r->total_steps,
                           .steps_per_epoch = r->steps_per_epoch, .step_first = r->step_first, .lr = lr,
                           .t_train0 = r->t_train0};
    progress_log(&r->progress, &r->learner, &r->reducer, &at);
}

static void evaluate(Run *r, long epoch) {
    timeacct_enter(&r->time, TIME_EVAL);
    reducer_drain(&r->reducer);   /* no reduction in flight while the host reads the device */
    const double lr = schedule_lr(&r->sched, epoch, r->step > 0 ? r->step - 1 : 0);
    eval_run_and_log(&r->eval, &r->learner, &r->replica, epoch, r->step, lr, r->t_train0);
    back_to_training(r);
}

static void save_checkpoint(Run *r, long epoch, long step_in_epoch, int wait) {
    timeacct_enter(&r->time, TIME_CHECKPOINT);
    reducer_drain(&r->reducer);   /* no reduction in flight while the host reads the device */
    ckpt_policy_save(&r->ckpt, &r->learner, &r->replica, r->data.train, epoch, step_in_epoch, r->step, wait);
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
        r->eval.eval_step != r->step)
        evaluate(r, epoch);
    const int mid = steps_done_in_epoch < r->steps_per_epoch;
    if (last_epoch || r->eval.target_reached || (cfg->save_every > 0 && (epoch + 1) % cfg->save_every == 0))
        save_checkpoint(r, mid ? epoch : epoch + 1, mid ? steps_done_in_epoch : 0, 0);
}

/* Progressive resizing: the epoch's training crop, for the model and the batches alike (a
 * resumed run takes its epoch's size here too). */
static void set_train_crop(Run *r, long epoch) {
    const int size = (int)config_train_crop_at(&r->cfg, epoch);
    Model *m = &r->learner.model;
    if (size == m->input_size) return;
    char err[4800];
    if (model_set_input_size(m, size, err, sizeof err) != 0) die("%s", err);   /* learner_network resolved it */
    batches_set_image_size(&r->batches, BATCH_TRAIN, size);
    log_info(&r->log, "epoch %ld: training crop %dx%d (--progressive_min_crop %ld to --train_crop_size %ld), %.3f GMACs "
             "per image", epoch + 1, size, size, r->cfg.progressive_min_crop, r->cfg.train_crop_size,
             model_macs_per_image(m) / 1e9);
}

/* Epochs of steps from the resume position to the end, or to a preemption. Returns 1 when the
 * run stopped for preemption (its checkpoint written). */
static int train(Run *r) {
    const Config *cfg = &r->cfg;
    int done = r->step >= r->total_steps;
    r->t_train0 = now_sec();
    back_to_training(r);
    if (done) {
        /* Resumed from the run's end: nothing to train, so the checkpoint is evaluated, with
         * this run's evaluation options (--tta, --ema_decay 0 for the trained weights). */
        log_info(&r->log, "training: the checkpoint is at the run's last step; evaluating it");
        evaluate(r, r->start_step > 0 || r->start_epoch == 0 ? r->start_epoch : r->start_epoch - 1);
        return 0;
    }
    for (long epoch = r->start_epoch; epoch < cfg->epochs && !done && !r->eval.target_reached; epoch++) {
        const long s0 = epoch == r->start_epoch ? r->start_step : 0;
        set_train_crop(r, epoch);
        if (learner_set_epoch(&r->learner, epoch))
            log_info(&r->log, "epoch %ld: the whitening convolution's bias is frozen from here (--whiten_bias_epochs %ld)",
                     epoch + 1, cfg->whiten_bias_epochs);
        dataloader_start_epoch(r->data.train, (int)epoch, (size_t)(s0 * cfg->grad_accum_steps));
        model_take_loss_sum(&r->learner.model);   /* a log window does not span epochs */
        progress_open_window(&r->progress, &r->reducer, now_sec());
        long s_done = s0;   /* optimizer steps completed in this epoch */
        for (long s = s0; s < r->steps_per_epoch; s++) {
            if (agree_to_stop(r, s - s0)) {
                const int sig = preempt_received();
                log_info(&r->log, "preemption: signal received (%s); checkpointing at epoch %ld step %ld and exiting with status %d",
                         sig ? strsignal(sig) : "on another rank", epoch + 1, r->step, PREEMPT_EXIT);
                save_checkpoint(r, epoch, s, 1);
                reducer_drain(&r->reducer);
                return 1;
            }
            const double lr = schedule_lr(&r->sched, epoch, r->step);
            optimizer_step(r, lr);
            if (r->learner.lookahead) lookahead_step(r);
            if (r->learner.ema.be && !r->learner.lookahead && r->step % cfg->ema_every == 0) {
                ema_step(r);
                /* torchvision's reference: with --model-ema-steps' adjustment the average restarts
                 * during the warm-up epochs, so that the next update copies the weights again */
                if (cfg->ema_adjust && epoch < cfg->lr_warmup_epochs) r->learner.ema.n_averaged = 0;
            }
            timeacct_step(&r->time, r->step);
            s_done = s + 1;
            if (r->step % cfg->log_interval == 0 || r->step == r->total_steps) log_progress(r, epoch, lr);
            if (cfg->eval_every_steps > 0 && r->step % cfg->eval_every_steps == 0) evaluate(r, epoch);
            done = r->step >= r->total_steps || r->eval.target_reached;
            if (cfg->save_every_steps > 0 && r->step % cfg->save_every_steps == 0 && !done && s + 1 < r->steps_per_epoch)
                save_checkpoint(r, epoch, s + 1, 0);
            if (done) break;
        }
        reducer_drain(&r->reducer);
        end_epoch(r, epoch, s_done, done);
    }
    return 0;
}

/* The last checkpoint on disk, the closing line, and, after a preemption, every rank waiting
 * for rank 0's file before anyone exits. */
static void finish(Run *r, int preempted) {
    char err[1200];
    const int rank = r->world.boot.rank;
    timeacct_enter(&r->time, TIME_CHECKPOINT);
    if (ckpt_policy_wait(&r->ckpt, err, sizeof err) != 0) log_warn(&r->log, "checkpoint: write failed: %s", err);
    timeacct_enter(&r->time, TIME_SHUTDOWN);
    if (preempted) {
        if (rank == 0 && jobdir_mark_preempted(&r->job, r->step) != 0)
            log_warn(&r->log, "preemption: cannot write %s/preempted: %s (the job script may not requeue)", r->job.path,
                     strerror(errno));
        /* The others wait here while rank 0 finishes writing: however slow the file system,
         * that must not end the job through the communication timeout. */
        comm_set_context(r->comm, "waiting for the preemption checkpoint");
        comm_set_timeout(r->comm, 0);
        comm_barrier(r->comm);
    } else {
        log_info(&r->log, "done: %ld steps in %.1f s, final test_acc %.4f (best %.4f)", r->step, now_sec() - r->t_train0,
                 r->eval.last_acc, r->eval.best_acc);
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
    if (!preempted && r->cfg.target_accuracy > 0.0)
        eval_report_target(&r->eval, r->step, now_sec() - r->t_train0, r->t_train0 - r->t_proc0);
}

/* What setup made, in the reverse order; the world last (communicator, MPI, PMIx). */
static void teardown_setup(Run *r) {
    progress_free(&r->progress);
    preflight_free(&r->ranks);
    splits_free(&r->data);
    timeacct_free(&r->time);
    logger_close(&r->log);
    free(r->config_json);
    config_free(&r->cfg);
    world_free(&r->world);
}

/* Everything in the reverse order of its making. */
static void teardown(Run *r) {
    eval_free(&r->eval);
    batches_free(&r->batches);
    ckpt_policy_free(&r->ckpt);
    replica_free(&r->replica);
    reducer_free(&r->reducer);
    learner_free(&r->learner);
    netspec_free(&r->net);
    teardown_setup(r);
}

int main(int argc, char **argv) {
    static Run run;
    Run *r = &run;
    timeacct_init(&r->time);   /* the run's wall time starts here */
    r->t_proc0 = now_sec();
    preempt_install();
    /* Job directories, logs and checkpoints follow the user's umask but are never
     * world-writable, whatever the umask. */
    umask(umask(0) | S_IWOTH);
    g_progname = "ddptrain";
    setup(r, argc, argv);
    if (r->cfg.preflight) {
        const int status = preflight_links(r->comm, r->ranks.hosts, &r->log, r->time.mono0);
        teardown_setup(r);
        return status;
    }
    build(r);
    plan_steps(r);
    resume_or_start(r);
    prepare_batches(r);
    const int preempted = train(r);
    finish(r, preempted);
    const int missed = !preempted && r->cfg.target_accuracy > 0.0 && !r->eval.target_reached;
    teardown(r);
    return preempted ? PREEMPT_EXIT : missed ? EVAL_EXIT_TARGET_MISSED : 0;
}
