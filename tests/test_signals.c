/* SPDX-License-Identifier: BSD-3-Clause */
/* test_signals.c - a signal that lands inside oneDNN's sgemm must not corrupt the heap.
 *
 * oneDNN 2.x's generated sgemm kernels run with the stack pointer in a heap buffer (signals.h):
 * a handler run on a thread inside one writes its frame into the heap. Two threads multiply
 * matrices with dnnl_sgemm and allocate while the process is sent SIGUSR2 every 20 us for a
 * few seconds. `test_signals route` takes the signal as ddptrain does (signals_route: blocked
 * in the computing threads, taken by a thread of its own) and must end with every signal
 * handled and the heap intact; `test_signals plain` installs the handler the usual way, to show
 * whether this machine's oneDNN has the fault (it then dies in malloc or free, SIGABRT). */
#include <dnnl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/signals.h"

static volatile sig_atomic_t g_count;
static volatile int g_stop;

static void on_usr2(int sig) { (void)sig; g_count++; }

/* Shapes of the Winograd transforms' products in ddptrain (tile batches of 16-256 channels),
 * with malloc and free in between, as the training loop does. */
static void *compute(void *arg) {
    const int n = 64 + 64 * (int)(long)arg;
    float *a = malloc(sizeof(float) * (size_t)n * n), *b = malloc(sizeof(float) * (size_t)n * n);
    float *c = malloc(sizeof(float) * (size_t)n * n);
    for (int i = 0; i < n * n; i++) { a[i] = (float)(i % 7) * 0.25f; b[i] = (float)(i % 5) * 0.5f; }
    while (!g_stop) {
        void *scratch[8];
        for (int k = 0; k < 8; k++) scratch[k] = malloc(64 + 700 * (size_t)k);
        if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n) != dnnl_success) abort();
        for (int k = 0; k < 8; k++) free(scratch[k]);
    }
    free(a); free(b); free(c);
    return NULL;
}

int main(int argc, char **argv) {
    const int route = argc > 1 && strcmp(argv[1], "route") == 0;
    const double seconds = argc > 2 ? atof(argv[2]) : 3.0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr2;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    const int sigs[1] = {SIGUSR2};
    if (route && signals_route(sigs, 1) != 0) { perror("signals_route"); return 1; }
    dnnl_set_verbose(0);
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, compute, (void *)i);
    /* this thread only sends: the signals go to the computing threads, or to signals.c's */
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, NULL);
    struct timespec ts = {0, 20000};
    long sent = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        kill(getpid(), SIGUSR2);
        sent++;
        nanosleep(&ts, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
    } while ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) < seconds);
    g_stop = 1;
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    /* a corrupted heap shows itself in the allocator's own checks */
    for (int k = 0; k < 2000; k++) free(malloc(16 + 37 * (size_t)(k % 300)));
    ts.tv_nsec = 50000000;
    nanosleep(&ts, NULL);   /* the last signals reach the handler */
    printf("%s: %ld signals sent, %ld handled, heap intact\n", route ? "route" : "plain", sent, (long)g_count);
    return g_count > 0 ? 0 : 1;
}
