/* SPDX-License-Identifier: BSD-3-Clause */
/* memavail.c - see memavail.h. */
#include "memavail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* A limit this large is "none" (v1 writes 2^63 rounded down to a page). */
#define NO_LIMIT 4.0e18

/* The number that starts the file dir/name, or after "key " on one of its lines when key is
 * given; negative when absent. "max" reads as no limit. */
static double read_number(const char *dir, const char *name, const char *key) {
    char path[1024], line[256];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return -1.0;
    FILE *f = fopen(path, "r");
    if (!f) return -1.0;
    double v = -1.0;
    const size_t kl = key ? strlen(key) : 0;
    while (fgets(line, sizeof line, f)) {
        if (key) {
            if (strncmp(line, key, kl) != 0 || line[kl] != ' ') continue;
            v = strtod(line + kl + 1, NULL);
        } else {
            v = strncmp(line, "max", 3) == 0 ? NO_LIMIT * 2 : strtod(line, NULL);
        }
        break;
    }
    fclose(f);
    return v;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Each group from mount/path up to mount itself: the tightest limit less its use. */
static void walk(MemAvail *m, const char *mount, const char *path, int v2) {
    char dir[1024];
    /* In a container the path names the group in the host's tree, which the container may
     * see as its mount's root: then only that root is read. */
    if (snprintf(dir, sizeof dir, "%s%s", mount, path) >= (int)sizeof dir || !is_dir(dir))
        snprintf(dir, sizeof dir, "%s", mount);
    const size_t base = strlen(mount);
    for (;;) {
        const double limit = read_number(dir, v2 ? "memory.max" : "memory.limit_in_bytes", NULL);
        if (limit >= 0.0 && limit < NO_LIMIT) {
            double used = read_number(dir, v2 ? "memory.current" : "memory.usage_in_bytes", NULL);
            double cache = read_number(dir, "memory.stat", v2 ? "inactive_file" : "total_inactive_file");
            if (used < 0.0) used = limit;
            if (cache > 0.0 && cache <= used) used -= cache;
            const double avail = limit > used ? limit - used : 0.0;
            if (m->cgroup_bytes < 0.0 || avail < m->cgroup_bytes) {
                m->cgroup_bytes = avail;
                m->limit_bytes = limit;
                snprintf(m->cgroup, sizeof m->cgroup, "%s", dir[base] ? dir + base : "/");
            }
        }
        char *slash = strrchr(dir + base, '/');
        if (!slash) break;
        *slash = '\0';
    }
}

void memavail_read(MemAvail *m, const char *root) {
    memset(m, 0, sizeof *m);
    m->node_bytes = m->cgroup_bytes = m->limit_bytes = -1.0;
    char dir[512], mount[600];
    snprintf(dir, sizeof dir, "%s/proc", root);
    const double kb = read_number(dir, "meminfo", "MemAvailable:");
    if (kb >= 0.0) m->node_bytes = kb * 1024.0;

    snprintf(dir, sizeof dir, "%s/proc/self", root);
    char path[1024];
    if (snprintf(path, sizeof path, "%s/cgroup", dir) >= (int)sizeof path) return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/') continue;
        *c2 = '\0';
        const char *controllers = c1 + 1, *group = c2 + 1;
        if (!strcmp(group, "/")) group = "";
        if (controllers[0] == '\0') {   /* v2: the unified tree, alone or beside v1's */
            snprintf(mount, sizeof mount, "%s/sys/fs/cgroup", root);
            char probe[700];
            snprintf(probe, sizeof probe, "%s/cgroup.controllers", mount);
            struct stat st;
            if (stat(probe, &st) != 0) snprintf(mount, sizeof mount, "%s/sys/fs/cgroup/unified", root);
            if (is_dir(mount)) walk(m, mount, group, 1);
        } else {
            /* v1: "memory" among the comma-separated controllers */
            char list[256];
            snprintf(list, sizeof list, ",%s,", controllers);
            if (!strstr(list, ",memory,")) continue;
            snprintf(mount, sizeof mount, "%s/sys/fs/cgroup/memory", root);
            if (is_dir(mount)) walk(m, mount, group, 0);
        }
    }
    fclose(f);
}

double memavail_bytes(const MemAvail *m) {
    double v = m->node_bytes;
    if (m->cgroup_bytes >= 0.0 && (v < 0.0 || m->cgroup_bytes < v)) v = m->cgroup_bytes;
    return v > 0.0 ? v : 0.0;
}

void memavail_describe(const MemAvail *m, char *buf, size_t n) {
    const double mib = 1048576.0;
    char node[64] = "MemAvailable unknown";
    if (m->node_bytes >= 0.0) snprintf(node, sizeof node, "MemAvailable %.1f MiB", m->node_bytes / mib);
    if (m->cgroup_bytes >= 0.0 && (m->node_bytes < 0.0 || m->cgroup_bytes < m->node_bytes))
        snprintf(buf, n, "memory cgroup %s: limit %.1f MiB, %.1f MiB free (%s)", m->cgroup, m->limit_bytes / mib,
                 m->cgroup_bytes / mib, node);
    else
        snprintf(buf, n, "%s", node);
}

/* What this process may still take, with the tests' override: "RANK:KB" gives rank RANK a
 * node of KB kilobytes. `what` gets its account. */
static double rank_avail(int rank, char *what, size_t n) {
    MemAvail m;
    memavail_read(&m, "");
    const char *t = getenv("DDPTRAIN_TEST_MEMAVAILABLE_KB");
    int t_rank;
    unsigned long long t_kb;
    if (t && sscanf(t, "%d:%llu", &t_rank, &t_kb) == 2 && t_rank == rank) {
        m.node_bytes = (double)t_kb * 1024.0;
        m.cgroup_bytes = -1.0;
    }
    memavail_describe(&m, what, n);
    return memavail_bytes(&m);
}

size_t memavail_budget(int rank, int local_size, char *how, size_t n) {
    const int local = local_size > 0 ? local_size : 1;
    char what[400];
    const size_t budget = (size_t)(rank_avail(rank, what, sizeof what) / 2.0 / local);
    snprintf(how, n, "budget %.1f MiB = half of %s / %d rank%s on this node", (double)budget / 1048576.0, what, local,
             local == 1 ? "" : "s");
    return budget;
}

/* The first two numbers of /proc/self/statm, in bytes: the address space and the resident set. */
static int statm(double *size, double *resident) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    unsigned long long a = 0, b = 0;
    const int got = fscanf(f, "%llu %llu", &a, &b);
    fclose(f);
    const long page = sysconf(_SC_PAGESIZE);
    if (got != 2 || page <= 0) return -1;
    *size = (double)a * (double)page;
    *resident = (double)b * (double)page;
    return 0;
}

size_t memavail_rank_share(int rank, int local_size, char *how, size_t n) {
    const int local = local_size > 0 ? local_size : 1;
    double share = rank_avail(rank, how, n) / local;
    /* An address-space limit (ulimit -v) is this process's alone: an allocation past it fails
     * whatever the node has free. */
    struct rlimit rl;
    double size, resident;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && statm(&size, &resident) == 0) {
        const double left = (double)rl.rlim_cur > size ? (double)rl.rlim_cur - size : 0.0;
        if (left < share) {
            share = left;
            snprintf(how, n, "address-space limit (ulimit -v) %.1f MiB, %.1f MiB of it free", (double)rl.rlim_cur / 1048576.0,
                     left / 1048576.0);
        }
    }
    return (size_t)share;
}

size_t memavail_rss_bytes(void) {
    double size, resident;
    return statm(&size, &resident) == 0 ? (size_t)resident : 0;
}
