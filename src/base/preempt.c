/* SPDX-License-Identifier: BSD-3-Clause */
/* preempt.c - see preempt.h. */
#include "preempt.h"

#include <signal.h>
#include <string.h>

#include "signals.h"
#include "util.h"

static volatile sig_atomic_t g_signal = 0;

static void on_signal(int sig) { g_signal = sig; }

static const int k_candidates[] = {SIGTERM, SIGUSR1, SIGUSR2, SIGHUP, SIGALRM};
#define N_CANDIDATES ((int)(sizeof k_candidates / sizeof *k_candidates))

void preempt_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < N_CANDIDATES; i++) sigaction(k_candidates[i], &sa, NULL);
    /* taken by a thread of their own, never inside a oneDNN kernel (signals.h) */
    CHECK(signals_route(k_candidates, N_CANDIDATES) == 0);
}

static int by_name(const char *name) {
    if (!strcmp(name, "SIGUSR1")) return SIGUSR1;
    if (!strcmp(name, "SIGUSR2")) return SIGUSR2;
    if (!strcmp(name, "SIGHUP")) return SIGHUP;
    if (!strcmp(name, "SIGALRM")) return SIGALRM;
    return SIGTERM;
}

void preempt_narrow(const char *name) {
    const int keep = by_name(name);
    for (int i = 0; i < N_CANDIDATES; i++) {
        const int s = k_candidates[i];
        if (s != SIGTERM && s != keep) signal(s, SIG_DFL);
    }
    if (g_signal != 0 && g_signal != SIGTERM && g_signal != keep) g_signal = 0;
}

int preempt_received(void) { return g_signal; }
