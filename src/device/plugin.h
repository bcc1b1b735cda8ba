/* SPDX-License-Identifier: BSD-3-Clause */
/* plugin.h - finds and loads the CUDA backend module (cuda_plugin.h) the first time a rank
 * asks for a GPU, so that a program built with CUDA starts where the CUDA libraries are absent.
 *
 * Where: $DDPTRAIN_PLUGIN_DIR/ddptrain-cuda.so when the variable is set and not empty (the
 * build tree, tests, a relocated install), else the configured $(pkglibdir)'s. Only there: a
 * module is one build's, so no other path is guessed. The module stays loaded until exit
 * (unloading the CUDA libraries while their threads run is not safe). */
#ifndef DDP_PLUGIN_H
#define DDP_PLUGIN_H

#include <stddef.h>

#include "cuda/cuda_plugin.h"

typedef enum {
    PLUGIN_LOADED = 0,
    PLUGIN_UNAVAILABLE = -1,    /* no module, or its libraries missing: a CPU node */
    PLUGIN_INCOMPATIBLE = -2,   /* a module of another build: an installation error */
} PluginStatus;

/* Loads the module once (later calls return the first result). PLUGIN_LOADED with the table in
 * *out, else one line in err naming the module's path and the reason (dlerror's). */
PluginStatus plugin_cuda_load(const CudaPlugin **out, char *err, size_t errlen);

/* The path plugin_cuda_load opens. */
void plugin_cuda_path(char *buf, size_t n);

#endif
