/* SPDX-License-Identifier: BSD-3-Clause */
/* duty_cycle PID STOP_MS RUN_MS: slows process PID from outside by SIGSTOP for STOP_MS and
 * SIGCONT for RUN_MS, over and over, until this program gets SIGTERM or SIGINT (the process is
 * then left running) or PID is gone. A shell loop of kill and sleep cannot cycle faster than its
 * forks, and cycles of a tenth of a second land whole in one phase of a short training step,
 * where the slowing shows as communication wait instead of compute; a cycle of a few
 * milliseconds spreads it evenly over the step, as a slow core or a noisy neighbour would. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { (void)sig; g_stop = 1; }

static long parse(const char *s, const char *what) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v <= 0) {
        fprintf(stderr, "duty_cycle: %s %s: must be a positive integer\n", what, s);
        exit(2);
    }
    return v;
}

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (!g_stop && nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: duty_cycle PID STOP_MS RUN_MS\n");
        return 2;
    }
    const pid_t pid = (pid_t)parse(argv[1], "PID");
    const long stop_ms = parse(argv[2], "STOP_MS"), run_ms = parse(argv[3], "RUN_MS");
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    long cycles = 0;
    while (!g_stop) {
        if (kill(pid, SIGSTOP) != 0) break;
        pause_ms(stop_ms);
        kill(pid, SIGCONT);
        pause_ms(run_ms);
        cycles++;
    }
    kill(pid, SIGCONT);
    printf("%ld cycles\n", cycles);
    return 0;
}
