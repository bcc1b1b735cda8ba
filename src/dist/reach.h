/* SPDX-License-Identifier: BSD-3-Clause */
/* reach.h - does a host answer on the network at all?
 *
 * When every rank posted a collective and none completed it, no rank is missing from the flight
 * records (flight.h): the ranks cannot reach each other. Which host is cut off is then told by
 * the network itself: a TCP connection attempt to a port of the host, any port, is answered at
 * once by a host that is up and reachable (accepted, or refused with a reset), and not at all
 * by a host behind a link that is down (or the network says it is unreachable). So the probe
 * needs nothing listening on the peer. A firewall that silently drops unsolicited connections
 * makes a host look cut off too; the verdict therefore says "does not answer on the network",
 * not more. Host names are resolved with getaddrinfo: /etc/hosts or a cache on a cluster, and
 * a host that does not resolve counts as not answering. */
#ifndef DDP_REACH_H
#define DDP_REACH_H

/* The port tried (discard; whether something listens there does not matter). */
#define REACH_PORT "9"

/* Tries every host of hosts[0..n) at once and waits at most limit_s for the answers;
 * answered[i] = 1 when hosts[i] answered, 0 when not. Empty names count as answering (unknown,
 * nothing to say). */
void reach_probe(const char *const *hosts, int n, double limit_s, unsigned char *answered);

#endif
