/* SPDX-License-Identifier: BSD-3-Clause */
/* config_table.h - THE list of ddptrain's options; nothing else declares one.
 *
 * From this table come the Config struct, the command-line parser (--name VALUE, --name=VALUE,
 * --name / --no-name for booleans), --help, range validation and the JSON dump written into the
 * job directory. Add an option here and it exists everywhere.
 *
 * X(name, type, default, min, max, help)
 *   type: INT (long), FLOAT (double), BOOL, STR, CHOICE (a string from a '|' list in `min`),
 *         SWITCH (auto, on or off as CONFIG_AUTO, 1, 0; spelt as a BOOL too)
 *   default: a string, parsed like a command-line value
 *   min/max: inclusive range for INT and FLOAT (ignored otherwise). */
#ifndef DDP_CONFIG_TABLE_H
#define DDP_CONFIG_TABLE_H

#define DDP_CONFIG_TABLE(X) \
    /* data */ \
    X(data_dir,         STR,    "data/synth", 0, 0,     "directory with train-*.h5 and test-*.h5 shards") \
    X(job_dir,          STR,    "",      0, 0,          "job directory (default: $SLURM_SUBMIT_DIR/runs/$SLURM_JOB_ID under Slurm, else runs/<date>-<time>-<pid>)") \
    X(config,           STR,    "",      0, 0,          "JSON file of options in the form of a job directory's config.json (its job_dir and resume too); flags on the command line override it wherever they stand") \
    X(num_classes,      INT,    "10",    2, 100000,     "number of classes (must match the dataset)") \
    X(image_size,       INT,    "32",    8, 4096,       "the stored images' size, which must match the dataset's: their height and width, or with JPEG shards their shorter side; the network's input size unless --train_crop_size is given") \
    X(augment,          BOOL,   "true",  0, 0,          "random crop (--crop_padding pixels of padding) and horizontal flip of training images") \
    X(alternating_flip, BOOL,   "false", 0, 0,          "airbench's alternating flip: --augment flips each training image in every other epoch, from a coin tossed once per image, instead of with probability 0.5 each time") \
    X(crop_pad_mode,    CHOICE, "zero",  "zero|reflect", 0, "the padding of --crop_padding: zero (torchvision's RandomCrop(padding=N)) or reflect (F.pad(mode='reflect'), airbench's translate; CPU data path only)") \
    X(crop_padding,     INT,    "4",     0, 16,         "pixels of zero padding on every side of a training image before --augment's random crop of its own size, torchvision's RandomCrop(S, padding=N) (0: no crop, flips only)") \
    X(train_crop_size,  INT,    "0",     0, 4096,       "RandomResizedCrop of every training image to this size, torchvision's --train-crop-size and the network's input size: a random box of --rrc_scale of the image's area and aspect 3/4 to 4/3, resized with Pillow's bilinear filter, then --augment's flip (with --no-augment: the centre crop of --val_resize_size); 0: the stored size, with --crop_padding's pad and crop") \
    X(random_erase,     FLOAT,  "0",     0, 1,          "torchvision's RandomErasing(p=P) of every training image after its normalisation, as the reference recipe's --random-erase: with probability P a box of 2% to 33% of the image, aspect 0.3 to 3.3, set to 0; CPU backend only") \
    X(mixup_alpha,      FLOAT,  "0",     0, 1000,       "torchvision's reference RandomMixup(alpha): each training batch mixed with itself rolled by one, lambda from Beta(alpha, alpha), the targets lambda * onehot(y) + (1 - lambda) * onehot(rolled y); with --cutmix_alpha one of the two per batch; 0: off; CPU backend only") \
    X(cutmix_alpha,     FLOAT,  "0",     0, 1000,       "torchvision's reference RandomCutmix(alpha): a box of each training batch pasted from the batch rolled by one, its side from lambda ~ Beta(alpha, alpha), the targets weighted by the box's area; with --mixup_alpha one of the two per batch; 0: off; CPU backend only") \
    X(ra_reps,          INT,    "0",     0, 64,         "torchvision's RASampler (repeated augmentation, --ra-sampler --ra-reps N): each epoch one permutation of the whole training split, each image N times in a row, dealt to the ranks in turn, n // 256 * 256 / ranks images per rank; every rank then holds the whole split in memory; 0 or 1: off; CPU backend only") \
    X(rrc_scale,        STR,    "0.08,1", 0, 0,         "LO,HI: the share of the image's area a --train_crop_size box covers, drawn uniformly, RandomResizedCrop(scale=(LO, HI)); 0 < LO <= HI <= 1") \
    X(auto_augment,     CHOICE, "none",  "none|imagenet|cifar10|svhn|ra|ta_wide|augmix", 0, "--augment's per-image pixel policy after the crop and flip, torchvision's reference --auto-augment on PIL images: imagenet, cifar10, svhn: AutoAugment's policies; ra: RandAugment (--ra_magnitude, --ra_num_ops); ta_wide: TrivialAugmentWide; nearest-neighbour geometry, fill 0; augmix: AugMix (--augmix_severity), three chains of tensor ops with bilinear geometry mixed with Dirichlet weights; made on the CPU by the loader's threads") \
    X(ra_magnitude,     INT,    "9",     0, 30,         "--auto_augment ra: the magnitude bin of 31 every op uses, torchvision's --ra-magnitude") \
    X(ra_num_ops,       INT,    "2",     1, 16,         "--auto_augment ra: ops applied in turn to each image, RandAugment's num_ops") \
    X(augmix_severity,  INT,    "3",     1, 10,         "--auto_augment augmix: AugMix's severity, its ops' magnitudes drawn from the first this many bins of 10, torchvision's --augmix-severity") \
    X(color_jitter,     STR,    "",      0, 0,          "B,C,S,H: torchvision's ColorJitter after --auto_augment on every training image: brightness, contrast and saturation factors uniform in [max(0, 1-v), 1+v], hue shift in [-H, H] (H <= 0.5), in a random order; 0: that one off; empty: none") \
    X(val_resize_size,  INT,    "0",     0, 4096,       "evaluation with --train_crop_size: the shorter side of every image resized to this (Pillow's bilinear, torchvision's --val-resize-size), then the centre --val_crop_size crop (0: --val_crop_size, no margin)") \
    X(val_crop_size,    INT,    "0",     0, 4096,       "evaluation with --train_crop_size: the centre crop after --val_resize_size, torchvision's --val-crop-size (0: --train_crop_size); another size than the training crop is evaluated by a second copy of the network's activations at that size, with the same weights (FixRes: a larger one pays after RandomResizedCrop)") \
    X(progressive_min_crop, INT, "0",    0, 4096,       "progressive resizing (FFCV's): the training crop of the first epochs, rising to --train_crop_size between --progressive_start_epoch and --progressive_end_epoch, with the same weights at every size (RandomResizedCrop draws the same boxes whatever the size); 0: off") \
    X(progressive_start_epoch, INT, "1", 1, 1000000,    "progressive resizing: the last epoch (counted from 1) at --progressive_min_crop") \
    X(progressive_end_epoch, INT, "0",   0, 1000000,    "progressive resizing: the first epoch at --train_crop_size; the epochs between train at the straight line from one size to the other, rounded to a multiple of --progressive_step (0: the last epoch)") \
    X(progressive_step, INT,    "32",    1, 4096,       "progressive resizing: the sizes between the two ends are multiples of this (FFCV's 32), kept within them") \
    X(data_workers,     INT,    "1",     1, 256,        "threads per rank that make each batch (decode JPEG shards, crop, resize, normalise) in the background while the previous batch trains") \
    X(shuffle,          BOOL,   "true",  0, 0,          "shuffle each rank's training samples every epoch (from seed, epoch, rank)") \
    X(prefetch,         BOOL,   "true",  0, 0,          "prepare the next batch in a background thread") \
    X(data_in_memory,   CHOICE, "auto",  "auto|yes|no", 0, "yes: read each rank's share of a split into memory at start; no: stream it from the shards in chunks, shuffled within windows of --data_window_chunks chunks; auto: in memory when the share fits in half of the memory free to the job (the node's MemAvailable, or its memory cgroup's limit less its use) divided by the node's ranks, streamed otherwise") \
    X(data_window_chunks, INT,  "8",     1, 1000000,    "chunks of --data_chunk_images images a streaming rank holds and shuffles together (--data_in_memory no)") \
    X(data_chunk_images, INT,   "1024",  1, 1000000,    "images per chunk a streaming rank reads at once (--data_in_memory no)") \
    /* model */ \
    X(model,            STR,    "miniresnet", 0, 0,     "the network: miniresnet, any of torchvision's 68 convolutional classification builders by its name (resnet50, mobilenet_v3_large, efficientnet_b0, densenet121, vgg16_bn, inception_v3, convnext_tiny, ...: torchvision's definitions and state_dict names; docs/networks.md lists them), or a JSON network file; CPU backend only but for miniresnet") \
    X(width,            INT,    "64",    1, 4096,       "MiniResNet: channels of the first stage (stages use width, 2*width, 4*width)") \
    X(blocks,           INT,    "2",     1, 64,         "MiniResNet: basic blocks per stage") \
    X(zero_init_residual, BOOL, "false", 0, 0,          "start at 0 the weight of the last batch norm of every residual branch (torchvision's zero_init_residual; the nodes a network file marks zero_init_residual)") \
    X(use_blurpool,     BOOL,   "false", 0, 0,          "FFCV's use_blurpool: every convolution with a stride above 1 and 16 or more input channels reads its input through a fixed 3x3 binomial blur (a \"blur\" node, docs/networks.md); the parameters and their names are unchanged, the network is named NAME-blurpool; CPU backend only for now") \
    X(aux_logits,       BOOL,   "true",  0, 0,          "GoogLeNet's and Inception v3's auxiliary classifiers, torchvision's aux_logits: in training their cross-entropy, times 0.3 each (GoogLeNet) or 0.4 (Inception v3), is added to the loss, and checkpoints hold their tensors; false leaves them out (a network's aux_loss nodes and the nodes that only feed them), as aux_logits=False; evaluation never runs them") \
    X(transform_input,  BOOL,   "false", 0, 0,          "torchvision's transform_input of GoogLeNet and Inception v3: a transform_input node before the network renormalises the ImageNet-normalised image to the [-1, 1] of Google's ported weights, per channel (x * std / 0.5 + (mean - 0.5) / 0.5)") \
    X(init_from,        STR,    "",      0, 0,          "start from the weights of this HDF5 file's /model group: a ddptrain checkpoint, or a PyTorch state_dict written by torch_to_ddptrain.py (torchvision's pretrained weights); tensors of another shape (the classifier of another class count) keep their initialisation and are named in the log; a resumed checkpoint takes precedence") \
    X(print_model,      BOOL,   "false", 0, 0,          "write the network of --model (with --width, --blocks) as a network file on standard output and exit: a start for one's own") \
    X(memory_check,     BOOL,   "true",  0, 0,          "refuse at start-up, before the job directory is made, a run whose estimated peak memory (the model at --batch_size, its optimizer state and batches, and what the process holds already) exceeds what the node's MemAvailable or memory cgroup leaves each of its ranks, naming the largest --batch_size that fits; false: run it anyway") \
    /* optimisation */ \
    X(batch_size,       INT,    "64",    1, 65536,      "images per rank per micro-step") \
    X(epochs,           INT,    "10",    1, 100000,     "passes over the training set") \
    X(max_steps,        INT,    "0",     0, 1000000000, "stop after this many optimizer steps (0: off)") \
    X(grad_accum_steps, INT,    "1",     1, 4096,       "micro-steps per optimizer step") \
    X(lr,               FLOAT,  "0.01",  0, 1e3,        "peak learning rate") \
    X(lr_ref_batch,     INT,    "0",     0, 1000000000, "the global batch (batch_size x grad_accum_steps x ranks) --lr and --min_lr are given for: at another global batch both are scaled by global / this (the linear scaling rule; 0: used as given at any global batch)") \
    X(optimizer,        CHOICE, "sgd",   "sgd|adamw|rmsprop|lamb|lars", 0, "sgd: torch.optim.SGD; adamw: torch.optim.AdamW (decoupled weight decay); rmsprop: torch.optim.RMSprop (--rmsprop_alpha, --momentum, centered=False; eps 0.0316 unless --opt_eps, torchvision's reference); lamb: timm's Lamb (Adam's moments, the global gradient norm clipped by --lamb_max_grad_norm, the update scaled per tensor by |w| / |update|); lars: timm's Lars (SGD's momentum on the gradient scaled per tensor by --lars_trust_coeff |w| / (|g| + weight_decay |w| + eps)); lamb and lars adapt only tensors with weight decay (--no_decay_1d excludes norms and biases); all but sgd CPU backend only for now") \
    X(momentum,         FLOAT,  "0.9",   0, 1,          "momentum of sgd, rmsprop and lars") \
    X(weight_decay,     FLOAT,  "1e-4",  0, 1,          "weight decay: L2, added to the gradient (sgd, rmsprop, lars) or to lamb's update; decoupled for adamw (w *= 1 - lr * this)") \
    X(nesterov,         BOOL,   "false", 0, 0,          "Nesterov momentum, torch.optim.SGD(nesterov=True): the step is lr * (d + momentum * buf) instead of lr * buf (needs --momentum above 0; --optimizer sgd or lars; CPU backend only for now)") \
    X(adam_beta1,       FLOAT,  "0.9",   0, 1,          "adamw and lamb: the first moment's decay, betas[0] (below 1)") \
    X(adam_beta2,       FLOAT,  "0.999", 0, 1,          "adamw and lamb: the second moment's decay, betas[1] (below 1)") \
    X(rmsprop_alpha,    FLOAT,  "0.9",   0, 1,          "rmsprop: the decay of the squared gradients' average, RMSprop's alpha (torchvision's reference recipe 0.9; PyTorch's default 0.99)") \
    X(opt_eps,          FLOAT,  "0",     0, 1,          "epsilon of adamw, rmsprop, lamb and lars (0: the optimizer's own: adamw 1e-8, rmsprop 0.0316 (torchvision's reference, TensorFlow's 1e-3 inside the square root), lamb 1e-6, lars 1e-8)") \
    X(lars_trust_coeff, FLOAT,  "0.001", 0, 1e3,        "lars: the trust coefficient of the ratio trust_coeff |w| / (|g| + weight_decay |w| + eps), timm's trust_coeff") \
    X(lamb_max_grad_norm, FLOAT, "1",    0, 1e9,        "lamb: the gradients are divided by max(1, their global L2 norm / this) first, timm's max_grad_norm (0: not)") \
    X(clip_grad_norm,   FLOAT,  "0",     0, 1e9,        "before each optimizer step, scale all gradients by this / (norm + 1e-6) when their global L2 norm (after the all-reduce and the fp16 loss scaler's unscale) is above this, torch.nn.utils.clip_grad_norm_; metrics.jsonl records the norm as grad_norm (0: off; CPU backend only for now)") \
    X(no_decay_1d,      BOOL,   "false", 0, 0,          "no weight decay on 1-D parameters (batch-norm weights and biases, the linear layer's bias), as PyTorch's two param groups of decay and no decay") \
    X(bn_bias_lr_mult,  FLOAT,  "1",     0, 1e3,        "learning rate multiplier of the batch-norm biases (a param group of its own in PyTorch, lr = this * --lr, scheduled alike)") \
    X(norm_weight_decay, FLOAT, "-1",    -1, 1,         "weight decay of the batch and layer norms' weights and biases, torchvision's --norm-weight-decay (0 in its recipes of 2022 on); negative: --weight_decay; unlike --no_decay_1d the convolutions' and linear layers' biases keep --weight_decay") \
    X(bn_bias_wd_mult,  FLOAT,  "1",     0, 1e3,        "weight decay multiplier of the batch-norm biases (airbench's 1 / --bn_bias_lr_mult: their group's weight_decay = wd / lr_biases, so that lr x decay is the others')") \
    X(lookahead_every,  INT,    "0",     0, 1000000,    "Lookahead as airbench's: every N optimizer steps a slow copy of the weights and batch-norm buffers moves towards them, slow = D * slow + (1 - D) * weights with D = --lookahead_decay^N x (step / total steps)^3, and the weights are set to it; at the last step the weights become the slow copy; checkpoints hold it as /ema (0: off; not with --ema_decay)") \
    X(lookahead_decay,  FLOAT,  "0.95",  0, 1,          "Lookahead's per-step decay (airbench's 0.95, its pull 0.95^5 x (step / total)^3 every 5 steps)") \
    X(whiten_bias_epochs, INT,  "0",     0, 1000000,    "the bias of a whitening convolution (a network file's \"whiten\": true) is trained in the first N epochs only, then frozen (airbench's whiten_bias_epochs 3; 0: trained throughout)") \
    X(whiten_images,    INT,    "5000",  1, 1000000000, "a whitening convolution's weight comes from the patches of this many training images, the first of each rank's share in equal parts (airbench's first 5000), their sums added across ranks") \
    X(whiten_eps,       FLOAT,  "5e-4",  0, 1,          "a whitening convolution's filters are eigenvectors / sqrt(eigenvalue + this) (airbench's 5e-4)") \
    X(label_smoothing,  FLOAT,  "0",     0, 1,          "label smoothing E of the training loss, nn.CrossEntropyLoss(label_smoothing=E): target (1-E) * one-hot + E / num_classes; below 1 (the test loss stays plain cross-entropy); CPU backend only for now") \
    X(lr_schedule,      CHOICE, "cosine", "cosine|cosine_step|constant|onecycle|step|multistep|exponential|triangle", 0, "cosine: annealed per epoch (CosineAnnealingLR(T_max=--epochs - --lr_warmup_epochs, eta_min=--min_lr)); cosine_step: per optimizer step; constant; onecycle: OneCycleLR(max_lr=--lr, total_steps=the run's optimizer steps, cycle_momentum=False) stepped per optimizer step; step: StepLR(--lr_step_size, --lr_gamma); multistep: MultiStepLR(--lr_milestones, --lr_gamma); exponential: ExponentialLR(--lr_gamma); triangle: airbench's per-step LambdaLR, from --lr / --onecycle_div_factor up to --lr over int(--onecycle_pct_start x the run's steps) steps, then down to --lr / (--onecycle_div_factor x --onecycle_final_div_factor) at the last; all but cosine_step, onecycle and triangle stepped per epoch, as torchvision's reference script") \
    X(lr_step_size,     INT,    "30",    1, 1000000,    "--lr_schedule step: multiply the learning rate by --lr_gamma every this many epochs (StepLR's step_size)") \
    X(lr_gamma,         FLOAT,  "0.1",   0, 1e3,        "--lr_schedule step, multistep and exponential: the learning rate's factor (their gamma)") \
    X(lr_milestones,    STR,    "",      0, 0,          "--lr_schedule multistep: the epochs, ascending and comma-separated (\"30,60,80\"), at which the learning rate is multiplied by --lr_gamma, counted as MultiStepLR counts them: from the end of --lr_warmup_epochs") \
    X(lr_warmup_epochs, INT,    "0",     0, 1000000,    "torchvision's warm-up in epochs: SequentialLR of --lr_warmup_method's schedule over this many epochs, then --lr_schedule (cosine, constant, step, multistep, exponential) from --lr; 0: none") \
    X(lr_warmup_method, CHOICE, "linear", "linear|constant", 0, "--lr_warmup_epochs' schedule: linear (LinearLR(start_factor=--lr_warmup_decay)) or constant (ConstantLR(factor=--lr_warmup_decay))") \
    X(lr_warmup_decay,  FLOAT,  "0.01",  1e-12, 1,      "--lr_warmup_epochs starts at --lr times this (LinearLR's start_factor, ConstantLR's factor)") \
    X(onecycle_pct_start, FLOAT, "0.3",  0, 1,          "share of the steps --lr_schedule onecycle rises in (OneCycleLR's pct_start)") \
    X(onecycle_anneal,  CHOICE, "cos",   "cos|linear", 0, "--lr_schedule onecycle's anneal_strategy") \
    X(onecycle_div_factor, FLOAT, "25",  1e-6, 1e12,    "--lr_schedule onecycle starts at --lr / this (OneCycleLR's div_factor)") \
    X(onecycle_final_div_factor, FLOAT, "1e4", 1e-6, 1e12, "--lr_schedule onecycle ends at --lr / onecycle_div_factor / this (OneCycleLR's final_div_factor)") \
    X(ema_decay,        FLOAT,  "0",     0, 1,          "exponential moving average of the weights and batch-norm buffers, AveragedModel(use_buffers=True) with ema = D * ema + (1-D) * p, evaluated and checkpointed instead of the trained weights (0: off; below 1)") \
    X(ema_every,        INT,    "1",     1, 1000000000, "update the --ema_decay average every N optimizer steps (at global steps N, 2N, ...)") \
    X(ema_adjust,       BOOL,   "false", 0, 0,          "torchvision's --model-ema-steps adjustment: the EMA's decay becomes 1 - min(1, (1 - --ema_decay) x ranks x --batch_size x --ema_every / --epochs); and the average restarts (a copy of the weights) at every update during --lr_warmup_epochs, as its reference script") \
    X(min_lr,           FLOAT,  "0",     0, 1e3,        "learning rate at the end of the cosine schedule") \
    X(warmup_steps,     INT,    "0",     0, 1000000000, "linear warm-up over this many optimizer steps") \
    X(seed,             INT,    "42",    0, 2147483647, "seed for weights, shuffling and augmentation") \
    X(use_amp,          SWITCH, "auto",  0, 0,          "mixed precision, float32 master weights: on GPUs the convolutions in --amp_dtype on the tensor cores; on the CPU (bf16 only) the convolutions and linear layers in bfloat16 through oneDNN, batch norm, loss and optimizer in float32 (native with avx512_bf16 or AMX, emulated and slower than float32 on plain AVX-512, refused below it); auto: on for GPUs, off for the CPU; the bare flag is on; --no-use_amp is off") \
    X(amp_dtype,        CHOICE, "bf16",  "bf16|fp16", 0, "16-bit type of --use_amp; fp16 adds dynamic loss scaling (GradScaler: init 65536, x0.5 on overflow and the step skipped, x2 after 2000 clean steps)") \
    X(amp_activations,  CHOICE, "16",    "16|32", 0,    "bits of the activations and their gradients in GPU memory under --use_amp: 16 as torch.autocast keeps them (half the memory traffic), or 32 (16 bits only inside the convolutions)") \
    X(device,           CHOICE, "auto",  "auto|cpu|cuda", 0, "where to train: cuda takes the local rank's GPU (CUDA builds), cpu the CPU, auto the GPU when one is visible and the CPU otherwise (give every node the same hardware, or pass cuda or cpu)") \
    X(tf32,             BOOL,   "false", 0, 0,          "TF32 tensor cores for the float32 convolutions and matrix products on GPUs (faster; about 1e-3 relative error; PyTorch's default for convolutions)") \
    X(cudnn_benchmark,  BOOL,   "false", 0, 0,          "time cuDNN's convolution algorithms once per shape and take the fastest (off: its heuristics; either way only deterministic ones, but timing may pick differently between runs)") \
    X(threads,          INT,    "0",     0, 4096,       "CPU threads per rank (0: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else the cores shared among the ranks of the node)") \
    /* evaluation, logging, checkpoints */ \
    X(eval_batch_size,  INT,    "256",   1, 65536,      "images per evaluation batch") \
    X(tta,              CHOICE, "none",  "none|flip|flip_shift", 0, "test-time augmentation of the evaluation (CPU): logits averaged over the image and its mirror image (flip), and over those of the image shifted by one pixel each way with reflection (flip_shift, 6 views, airbench's)") \
    X(target_accuracy,  FLOAT,  "0",     0, 1,          "stop at the first evaluation whose test accuracy reaches this fraction (MLPerf's rule), evaluating every epoch at least, and report the time to train; a run that ends below it exits with status 5 (0: off)") \
    X(eval_every_steps, INT,    "0",     0, 1000000000, "also evaluate every N optimizer steps (0: off)") \
    X(eval_every,       INT,    "1",     0, 100000,     "evaluate test accuracy every N epochs (0: only at the end)") \
    X(log_interval,     INT,    "10",    1, 1000000000, "log training loss every N optimizer steps") \
    X(save_every,       INT,    "1",     0, 100000,     "checkpoint every N epochs (0: off)") \
    X(save_every_steps, INT,    "0",     0, 1000000000, "also checkpoint every N optimizer steps (0: off)") \
    X(keep_checkpoints, INT,    "3",     1, 1000000,    "checkpoints kept in <job_dir>/checkpoints") \
    X(resume,           STR,    "auto",  0, 0,          "auto: newest valid checkpoint of the job dir, if any; none; or a checkpoint file") \
    X(resume_data_change, BOOL, "false", 0, 0,          "resume a checkpoint written with another --batch_size, --grad_accum_steps, --seed or training data (refused otherwise): weights, optimizer and step count are kept, the data order starts over at the next epoch") \
    X(preempt_signal,   CHOICE, "SIGUSR2", "SIGUSR2|SIGUSR1|SIGTERM|SIGHUP|SIGALRM", 0, "signal that asks for checkpoint-and-exit (SIGTERM always does)") \
    X(trace,            BOOL,   "false", 0, 0,          "write a Chrome trace per rank into the job dir (trace-rank-NNNNN.json)") \
    X(tensorboard,      BOOL,   "false", 0, 0,          "rank 0 also writes every metrics.jsonl record's numbers as TensorBoard scalars (train/loss, train/lr, train/data_share, test/acc, ...) and, when the straggler check exchanges them (several ranks, --straggler_factor above 0), every rank's data and communication shares (rank/NNN/...), into a new event file of <job_dir>/tensorboard per run: tensorboard --logdir runs/") \
    /* data parallelism */ \
    X(sync_bn,          BOOL,   "false", 0, 0,          "batch-norm statistics over all ranks (SyncBatchNorm) instead of per rank") \
    X(bucket_cap_mb,    FLOAT,  "0",     0, 1e5,        "gradient all-reduce bucket size in MB (0: an eighth of the model's gradients, at least 1 and at most 25 MB)") \
    X(first_bucket_mb,  FLOAT,  "1",     0.001, 1e5,    "size of the first (last-layer) bucket in MB, small so communication starts early") \
    X(comm_progress_us, FLOAT,  "1000",   0, 1e6,        "microseconds between a CPU rank's tests of its gradient buckets in flight while backward runs, on a thread of their own, so transfers go on inside long layers (0: test only between layers)") \
    X(comm_allreduce,   CHOICE, "ring",  "ring|mpi", 0, "how CPU ranks all-reduce gradient buckets: ring (ddptrain's own ring of point-to-point messages: every link busy both ways at once, the sum's order fixed by rank) or mpi (the MPI library's MPI_Iallreduce; Open MPI 4 sends one way at a time below 4 ranks)") \
    X(comm_dtype,       CHOICE, "fp32",  "fp32|bf16|fp16", 0, "type gradients are all-reduced in (CPU ranks): bf16 or fp16 halve the bytes on the wire; each reduction step adds in float32 and rounds to 16 bits, the result is divided by the world size in float32") \
    X(comm_timeout,     FLOAT,  "300",   0, 1e7,        "seconds a collective may take before the job is ended, naming the rank or host to blame (0: wait forever)") \
    X(straggler_factor, FLOAT,  "1.15",  0, 100,        "name a rank (log and metrics.jsonl) whose compute + data time exceeds the median rank's by this factor over the last 30 steps, checked at every --log_interval (0: off)") \
    X(preflight,        BOOL,   "false", 0, 0,          "check the job, measure every rank's network link with a ring of point-to-point transfers, log the table and exit without training: status 0 when all is well, 4 when a rank or a link is below half the median rate (CPU ranks; under a minute)")

#endif
