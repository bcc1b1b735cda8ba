/* SPDX-License-Identifier: BSD-3-Clause */
/* hdf5_lock.c - see hdf5_lock.h. */
#include "hdf5_lock.h"

#include <pthread.h>

#include "util.h"

static pthread_mutex_t g_hdf5_mutex;
static pthread_once_t g_hdf5_once = PTHREAD_ONCE_INIT;

/* Recursive, so nested helpers that each lock do not deadlock; a static initializer for a
 * recursive mutex is a GNU extension, pthread_once keeps this portable. */
static void hdf5_lock_setup(void) {
    pthread_mutexattr_t a;
    CHECK(pthread_mutexattr_init(&a) == 0);
    CHECK(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE) == 0);
    CHECK(pthread_mutex_init(&g_hdf5_mutex, &a) == 0);
    pthread_mutexattr_destroy(&a);
}

void hdf5_lock(void) {
    CHECK(pthread_once(&g_hdf5_once, hdf5_lock_setup) == 0);
    CHECK(pthread_mutex_lock(&g_hdf5_mutex) == 0);
}

void hdf5_unlock(void) {
    CHECK(pthread_mutex_unlock(&g_hdf5_mutex) == 0);
}
