/* SPDX-License-Identifier: BSD-3-Clause */
/* signals.c - the thread that takes the asynchronous signals (see signals.h). */
#include "signals.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

static sigset_t g_routed;

/* What the kernel would have done on a thread that did not block sig: the installed handler,
 * or the default action. A handler that resets the disposition and raises the signal again
 * (to end the process as it would have ended) leaves it pending on this thread, where it is
 * blocked; unblocking it for a moment lets it take effect. */
static void dispatch(int sig, siginfo_t *info) {
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) != 0) return;
    if (cur.sa_flags & SA_SIGINFO) {
        cur.sa_sigaction(sig, info, NULL);
    } else if (cur.sa_handler == SIG_DFL) {
        raise(sig);
    } else if (cur.sa_handler != SIG_IGN) {
        cur.sa_handler(sig);
    }
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    pthread_sigmask(SIG_BLOCK, &one, NULL);
}

static void *signal_thread(void *arg) {
    (void)arg;
    for (;;) {
        siginfo_t info;
        int sig = sigwaitinfo(&g_routed, &info);
        if (sig > 0) dispatch(sig, &info);
    }
    return NULL;
}

int signals_route(const int *sigs, int n) {
    sigemptyset(&g_routed);
    for (int i = 0; i < n; i++) sigaddset(&g_routed, sigs[i]);
    int rc = pthread_sigmask(SIG_BLOCK, &g_routed, NULL);
    if (rc != 0) { errno = rc; return -1; }
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, signal_thread, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_sigmask(SIG_UNBLOCK, &g_routed, NULL);
        errno = rc;
        return -1;
    }
    return 0;
}
