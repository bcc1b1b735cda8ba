/* SPDX-License-Identifier: BSD-3-Clause */
/* memavail.h - how much memory this process may still take, for --data_in_memory auto.
 *
 * The node's MemAvailable (/proc/meminfo) is not the answer on a cluster: Slurm confines a job
 * to the memory it asked for (--mem, --mem-per-cpu) with a memory cgroup, and so do containers.
 * A job that held a share of 40 GB in memory because the node had 200 GB free would be killed
 * by its 16 GB limit. So the answer is the least of MemAvailable and, for this process's memory
 * cgroup and each group above it that has a limit, that limit less what the group uses now,
 * not counting the inactive file cache it holds (the kernel reclaims that before it kills).
 * cgroup v2 (memory.max, memory.current) and v1 (memory.limit_in_bytes, memory.usage_in_bytes)
 * are both read, at the usual mount points. */
#ifndef DDP_MEMAVAIL_H
#define DDP_MEMAVAIL_H

#include <stddef.h>

typedef struct {
    double node_bytes;     /* MemAvailable; negative when /proc/meminfo could not be read */
    double cgroup_bytes;   /* the tightest group's limit less its use; negative when no group has a limit */
    double limit_bytes;    /* that group's limit */
    char cgroup[256];      /* that group's path, as /proc/self/cgroup names it */
} MemAvail;

/* Reads the files under `root` ("" for the running system; tests pass a directory holding
 * proc/meminfo, proc/self/cgroup and sys/fs/cgroup/...). Never fails: what cannot be read
 * is left negative. */
void memavail_read(MemAvail *m, const char *root);

/* The bytes this process may take: the least of the two that were read, 0 when neither was. */
double memavail_bytes(const MemAvail *m);

/* One line for the log: "MemAvailable 23290.0 MiB" or "cgroup /slurm/uid_0/job_7: limit 4096.0
 * MiB, free 3900.2 MiB (MemAvailable 23290.0 MiB)". */
void memavail_describe(const MemAvail *m, char *buf, size_t n);

/* --data_in_memory auto's budget per rank: half of what this process may still take (the
 * node's MemAvailable, or less where a memory cgroup limits the job) shared among the node's
 * `local_size` ranks (the other half is for the model, the batches and whatever else runs
 * there). 0 when neither can be read. `how` gets the log's account of it. The environment's
 * DDPTRAIN_TEST_MEMAVAILABLE_KB="RANK:KB" gives rank RANK a node of KB kilobytes (tests). */
size_t memavail_budget(int rank, int local_size, char *how, size_t n);

/* All of what this process may still take (the same reading and override), shared among the
 * node's `local_size` ranks, or what an address-space limit (ulimit -v) leaves it when that is
 * less: what the memory check (run/memory_check.h) lets a rank add to what it holds. `how`
 * gets the reading's account (memavail_describe's, or the limit's). */
size_t memavail_rank_share(int rank, int local_size, char *how, size_t n);

/* This process's resident memory now (/proc/self/statm), 0 where it cannot be read. */
size_t memavail_rss_bytes(void);

#endif
