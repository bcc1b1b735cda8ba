/* SPDX-License-Identifier: BSD-3-Clause */
/* plugin.c - see plugin.h. */
#include "build_config.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "base/util.h"

#ifndef DDP_PKGLIBDIR
#error "DDP_PKGLIBDIR (the directory make install puts the module in) must be defined"
#endif

#define PLUGIN_DIR_ENV "DDPTRAIN_PLUGIN_DIR"

void plugin_cuda_path(char *buf, size_t n) {
    const char *dir = getenv(PLUGIN_DIR_ENV);
    snprintf_check(buf, n, "%s/%s", dir && *dir ? dir : DDP_PKGLIBDIR, CUDA_PLUGIN_FILE);
}

/* dlerror() starts with the path when the file itself is missing; the caller names it already. */
static const char *reason(const char *path, const char *dlerr) {
    if (!dlerr) return "unknown reason";
    size_t n = strlen(path);
    return !strncmp(dlerr, path, n) && !strncmp(dlerr + n, ": ", 2) ? dlerr + n + 2 : dlerr;
}

static PluginStatus load(const CudaPlugin **out, char *err, size_t errlen) {
    char path[4200];
    plugin_cuda_path(path, sizeof path);
    const char *env = getenv(PLUGIN_DIR_ENV);
    const char *from = env && *env ? " (" PLUGIN_DIR_ENV ")" : "";
    /* RTLD_NOW: a symbol missing in the host or a library is an error here, not a crash in
     * the middle of training; RTLD_LOCAL: the CUDA libraries' symbols stay out of the host's. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        errf(err, errlen, "cannot load the CUDA backend %s%s: %s", path, from, reason(path, dlerror()));
        return PLUGIN_UNAVAILABLE;
    }
    dlerror();
    CudaPluginEntry entry = (CudaPluginEntry)(size_t)dlsym(h, CUDA_PLUGIN_SYMBOL);
    if (!entry) {
        errf(err, errlen, "%s%s is not a ddptrain CUDA backend module: %s", path, from, dlerror());
        return PLUGIN_INCOMPATIBLE;
    }
    const CudaPlugin *t = entry(CUDA_PLUGIN_ABI);
    if (!t) {
        errf(err, errlen, "%s%s: the module returned no entry points for ABI version %d", path, from, CUDA_PLUGIN_ABI);
        return PLUGIN_INCOMPATIBLE;
    }
    if (t->abi_version != CUDA_PLUGIN_ABI) {
        errf(err, errlen, "%s%s: CUDA backend module ABI version %d, this ddptrain %s needs version %d: install the "
             "module built with this ddptrain", path, from, t->abi_version, PACKAGE_VERSION, CUDA_PLUGIN_ABI);
        return PLUGIN_INCOMPATIBLE;
    }
    *out = t;
    return PLUGIN_LOADED;
}

PluginStatus plugin_cuda_load(const CudaPlugin **out, char *err, size_t errlen) {
    static int tried;
    static PluginStatus status;
    static const CudaPlugin *table;
    static char message[4800];
    if (!tried) {
        tried = 1;
        status = load(&table, message, sizeof message);
    }
    *out = status == PLUGIN_LOADED ? table : NULL;
    if (status != PLUGIN_LOADED) snprintf(err, errlen, "%s", message);
    return status;
}
