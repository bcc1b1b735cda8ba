/* train.c - ddptrain: parse the config, open the data, build MiniResNet, train, evaluate.
 *
 * Reads top to bottom: config -> data -> job directory and logs -> model and optimizer ->
 * loop { batch, forward, backward, update, log } -> evaluate per epoch. */
#include "build_config.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "config.h"
#include "dataloader.h"
#include "logger.h"
#include "model.h"
#include "optim.h"
#include "schedule.h"
#include "util.h"

/* The job directory: --job_dir, else $SLURM_SUBMIT_DIR/runs/$SLURM_JOB_ID under Slurm (a
 * requeued job finds it again), else runs/<date>-<time>-<pid>. */
static void default_job_dir(char *out, size_t n) {
    const char *job = getenv("SLURM_JOB_ID");
    if (job && *job) {
        const char *submit = getenv("SLURM_SUBMIT_DIR");
        snprintf_check(out, n, "%s/runs/%s", submit && *submit ? submit : ".", job);
        return;
    }
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf_check(out, n, "runs/%s-%d", stamp, (int)getpid());
}

static DataLoader *open_split(const Config *c, const char *split, int train, char *err, size_t n) {
    DataLoaderOptions o = {
        .data_dir = c->data_dir, .split = split, .rank = 0, .world_size = 1,
        .batch_size = (int)(train ? c->batch_size : c->eval_batch_size),
        .augment = train && c->augment, .shuffle = train, .drop_last = train,
        .seed = (uint64_t)c->seed, .num_classes = (int)c->num_classes,
        .image_size = (int)c->image_size, .prefetch = c->prefetch,
    };
    return dataloader_open(&o, err, n);
}

/* Test accuracy over the whole test split. */
static double evaluate(Model *m, DataLoader *dl, float *x, int *y, double *loss_out) {
    dataloader_start_epoch(dl, 0, 0);
    long correct = 0, total = 0;
    double loss_sum = 0.0;
    int n;
    while ((n = dataloader_next(dl, x, y)) > 0) {
        int c = 0;
        float loss = model_forward(m, x, y, n, 0, 1.0f, &c);
        loss_sum += (double)loss * n;
        correct += c;
        total += n;
    }
    *loss_out = total ? loss_sum / (double)total : 0.0;
    return total ? (double)correct / (double)total : 0.0;
}

int main(int argc, char **argv) {
    g_progname = "ddptrain";
    Config cfg;
    config_init(&cfg);
    config_parse_args(&cfg, argc, argv);

    Logger log;
    logger_init(&log, 0, 1);

    if (!strcmp(cfg.device, "cuda"))
        die_code(2, "--device cuda: this ddptrain was built without the CUDA backend");
#ifdef _OPENMP
    if (cfg.threads > 0) omp_set_num_threads((int)cfg.threads);
    int threads = omp_get_max_threads();
#else
    int threads = 1;
#endif

    /* Data first: a bad dataset must fail before anything is written. */
    char err[1024];
    DataLoader *train_dl = open_split(&cfg, "train", 1, err, sizeof err);
    if (!train_dl) die("%s", err);
    DataLoader *test_dl = open_split(&cfg, "test", 0, err, sizeof err);
    if (!test_dl) die("%s", err);
    if (dataloader_num_batches(train_dl) < (size_t)cfg.grad_accum_steps)
        die("--data_dir %s: %zu training images are fewer than one optimizer step (batch_size %ld x grad_accum_steps %ld)",
            cfg.data_dir, dataloader_num_samples(train_dl), cfg.batch_size, cfg.grad_accum_steps);

    char job_dir[4096];
    if (cfg.job_dir[0]) snprintf_check(job_dir, sizeof job_dir, "%s", cfg.job_dir);
    else default_job_dir(job_dir, sizeof job_dir);
    if (mkdir_p(job_dir) != 0) die("--job_dir %s: cannot create directory: %s", job_dir, strerror(errno));
    if (access(job_dir, W_OK) != 0) die("--job_dir %s: not writable: %s", job_dir, strerror(errno));
    if (logger_open(&log, job_dir, err, sizeof err) != 0) die("%s", err);
    char path[4200];
    snprintf_check(path, sizeof path, "%s/config.json", job_dir);
    char *json = config_to_json(&cfg);
    if (write_file_atomic(path, json, strlen(json)) != 0) die("%s: cannot write: %s", path, strerror(errno));
    free(json);

    log_info(&log, "ddptrain " PACKAGE_VERSION ": job dir %s", job_dir);
    log_info(&log, "device: cpu (%d threads), %s%s", threads, ops_cpu_describe(),
             !strcmp(cfg.device, "auto") ? "; no CUDA backend in this build" : "");
    log_info(&log, "data: %s: train %zu images (%s), test %zu images", cfg.data_dir,
             dataloader_num_samples(train_dl), dataloader_describe(train_dl),
             dataloader_num_samples(test_dl));

    int max_batch = (int)(cfg.batch_size > cfg.eval_batch_size ? cfg.batch_size : cfg.eval_batch_size);
    Model model;
    model_init(&model, (int)cfg.width, (int)cfg.blocks, (int)cfg.num_classes, (int)cfg.image_size, max_batch);
    model_init_weights(&model, (uint64_t)cfg.seed);
    log_info(&log, "model: MiniResNet width %ld blocks %ld: %zu parameters", cfg.width, cfg.blocks,
             model.num_params);

    SGD opt;
    sgd_init(&opt, model.num_params, (float)cfg.momentum, (float)cfg.weight_decay);
    long steps_per_epoch = (long)dataloader_num_batches(train_dl) / cfg.grad_accum_steps;
    Schedule sched;
    CHECK(schedule_init(&sched, cfg.lr_schedule, cfg.lr, cfg.min_lr, cfg.epochs, steps_per_epoch,
                        cfg.warmup_steps) == 0);
    long total_steps = steps_per_epoch * cfg.epochs;
    if (cfg.max_steps > 0 && cfg.max_steps < total_steps) total_steps = cfg.max_steps;
    log_info(&log, "training: %ld epochs x %ld steps (batch %ld x accum %ld), %ld steps in all",
             cfg.epochs, steps_per_epoch, cfg.batch_size, cfg.grad_accum_steps, total_steps);

    size_t img = (size_t)cfg.image_size * cfg.image_size * 3;
    float *x = alignedAllocCheck((size_t)max_batch * img * sizeof(float));
    int *y = mallocCheck((size_t)max_batch * sizeof(int));

    long step = 0;
    double best_acc = 0.0, last_acc = -1.0;
    int done = 0;
    double t_train0 = now_sec();
    for (long epoch = 0; epoch < cfg.epochs && !done; epoch++) {
        dataloader_start_epoch(train_dl, (int)epoch, 0);
        double t_log = now_sec(), data_wait = 0.0, loss_acc = 0.0;
        long images_since = 0, loss_n = 0;
        for (long s = 0; s < steps_per_epoch; s++) {
            double lr = schedule_lr(&sched, epoch, step);
            model_zero_grad(&model);
            float loss_step = 0.0f;
            for (long micro = 0; micro < cfg.grad_accum_steps; micro++) {
                int n = dataloader_next(train_dl, x, y);
                CHECK(n == cfg.batch_size);
                loss_step += model_forward(&model, x, y, n, 1, 1.0f / (float)cfg.grad_accum_steps, NULL);
                model_backward(&model);
                images_since += n;
            }
            sgd_step(&opt, model.params, model.grads, (float)lr);
            model_params_changed(&model);
            step++;
            loss_step /= (float)cfg.grad_accum_steps;
            if (!isfinite(loss_step)) die("step %ld: loss is %f; training diverged (lower --lr?)", step, loss_step);
            loss_acc += loss_step;
            loss_n++;
            data_wait += dataloader_take_wait_time(train_dl);
            if (step % cfg.log_interval == 0 || step == total_steps) {
                double t = now_sec();
                double ips = images_since / (t - t_log);
                log_info(&log, "epoch %ld step %ld/%ld loss %.4f lr %.5f %.1f images/s data wait %.1f%%",
                         epoch + 1, step, total_steps, loss_acc / loss_n, lr, ips,
                         100.0 * data_wait / (t - t_log));
                char line[512];
                snprintf_check(line, sizeof line,
                               "{\"epoch\": %ld, \"step\": %ld, \"loss\": %.6f, \"lr\": %.8g, \"images_per_sec\": %.2f, \"data_wait_sec\": %.4f, \"time\": %.3f}",
                               epoch + 1, step, loss_acc / loss_n, lr, ips, data_wait, t - t_train0);
                logger_metrics(&log, line);
                t_log = t; images_since = 0; data_wait = 0.0; loss_acc = 0.0; loss_n = 0;
            }
            if (step >= total_steps) { done = 1; break; }
        }
        int last_epoch = done || epoch + 1 == cfg.epochs;
        if ((cfg.eval_every > 0 && (epoch + 1) % cfg.eval_every == 0) || last_epoch) {
            double t0 = now_sec(), test_loss;
            last_acc = evaluate(&model, test_dl, x, y, &test_loss);
            if (last_acc > best_acc) best_acc = last_acc;
            log_info(&log, "epoch %ld step %ld test_acc %.4f test_loss %.4f (%.1f s)", epoch + 1, step,
                     last_acc, test_loss, now_sec() - t0);
            char line[512];
            snprintf_check(line, sizeof line,
                           "{\"epoch\": %ld, \"step\": %ld, \"lr\": %.8g, \"test_acc\": %.6f, \"test_loss\": %.6f, \"time\": %.3f}",
                           epoch + 1, step, schedule_lr(&sched, epoch, step > 0 ? step - 1 : 0), last_acc,
                           test_loss, now_sec() - t_train0);
            logger_metrics(&log, line);
        }
    }
    log_info(&log, "done: %ld steps in %.1f s, final test_acc %.4f (best %.4f)", step,
             now_sec() - t_train0, last_acc, best_acc);

    free(x);
    free(y);
    sgd_free(&opt);
    model_free(&model);
    dataloader_free(train_dl);
    dataloader_free(test_dl);
    logger_close(&log);
    config_free(&cfg);
    return 0;
}
