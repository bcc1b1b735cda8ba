/* SPDX-License-Identifier: BSD-3-Clause */
/* reach.c - see reach.h. */
#include "reach.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/util.h"

/* A non-blocking connection attempt to host; the socket (-1 when the answer is known at once,
 * in *answered). */
static int start(const char *host, unsigned char *answered) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    *answered = 0;
    if (getaddrinfo(host, REACH_PORT, &hints, &res) != 0 || !res) return -1;
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, res->ai_protocol);
    if (fd < 0) {
        *answered = 1;   /* a local failure says nothing about the host */
    } else if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
        *answered = 1;   /* connected at once (a local address) */
        close(fd);
        fd = -1;
    } else if (errno != EINPROGRESS) {
        *answered = errno == ECONNREFUSED;   /* EHOSTUNREACH, ENETUNREACH: no */
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

void reach_probe(const char *const *hosts, int n, double limit_s, unsigned char *answered) {
    struct pollfd *p = callocCheck((size_t)(n > 0 ? n : 1), sizeof *p);
    for (int i = 0; i < n; i++) {
        p[i].fd = -1;
        if (!hosts[i] || !hosts[i][0]) { answered[i] = 1; continue; }
        p[i].fd = start(hosts[i], &answered[i]);
        p[i].events = POLLOUT;
    }
    const double t0 = now_sec();
    for (;;) {
        int waiting = 0;
        for (int i = 0; i < n; i++) waiting += p[i].fd >= 0;
        double left = limit_s - (now_sec() - t0);
        if (!waiting || left <= 0) break;
        if (poll(p, (nfds_t)n, (int)(left * 1000) + 1) < 0 && errno != EINTR) break;
        for (int i = 0; i < n; i++) {
            if (p[i].fd < 0 || !p[i].revents) continue;
            int e = 0;
            socklen_t len = sizeof e;
            getsockopt(p[i].fd, SOL_SOCKET, SO_ERROR, &e, &len);
            answered[i] = e == 0 || e == ECONNREFUSED;
            close(p[i].fd);
            p[i].fd = -1;
        }
    }
    for (int i = 0; i < n; i++)
        if (p[i].fd >= 0) close(p[i].fd);   /* no answer within the limit */
    free(p);
}
