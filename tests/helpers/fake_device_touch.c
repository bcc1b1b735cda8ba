/* SPDX-License-Identifier: BSD-3-Clause */
/* fake_device_touch.c - host code that breaks the device discipline on purpose, for
 * tests/test_fake_device.sh to see the fake device module (fake_device.h) catch it. Loads the
 * module from DDPTRAIN_PLUGIN_DIR as ddptrain does and opens its backend, then:
 *   ok       upload, an operation, download: prints the result (the module lets it through)
 *   read     reads a device buffer from the host: must die with "device memory touched by the host"
 *   write    writes one past the end of a device buffer's pages (its guard page): the same
 *   operand  passes host memory to an operation: must die naming the operand */
#include <stdio.h>
#include <string.h>

#include "device/plugin.h"
#include "base/util.h"

int main(int argc, char **argv) {
    if (argc != 2) die("usage: fake_device_touch ok|read|write|operand");
    const CudaPlugin *cu;
    char err[4800];
    if (plugin_cuda_load(&cu, err, sizeof err) != PLUGIN_LOADED) die("%s", err);
    const Backend *be = cu->backend_open(0, err, sizeof err);
    if (!be) die("%s", err);
    const float host[4] = {1, 2, 3, 4};
    float *d = be->alloc(sizeof host), *e = be->alloc(sizeof host);   /* the fault names main as their site */
    be->upload(d, host, sizeof host);
    be->upload(e, host, sizeof host);
    if (!strcmp(argv[1], "ok")) {
        be->add_inplace(d, e, 4);
        float back[4];
        be->download(back, d, sizeof back);
        printf("%g %g %g %g\n", back[0], back[1], back[2], back[3]);
    } else if (!strcmp(argv[1], "read")) {
        printf("%g\n", ((volatile float *)d)[1]);
    } else if (!strcmp(argv[1], "write")) {
        ((volatile char *)e)[4096 * ((4 * sizeof(float) + 4095) / 4096)] = 1;
    } else if (!strcmp(argv[1], "operand")) {
        float h[4] = {0};
        be->add_inplace(d, h, 4);
    } else {
        die("fake_device_touch: unknown mode %s", argv[1]);
    }
    be->release(d);
    be->release(e);
    return 0;
}
