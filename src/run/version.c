/* SPDX-License-Identifier: BSD-3-Clause */
/* version.c - `ddptrain --version`: release, backends and library versions (version.h).
 *
 * Run-time versions where a library can report them without being initialised (HDF5, MPI,
 * PMIx, oneDNN: the library actually loaded, which on a cluster may differ from the headers).
 * The CUDA libraries live in the CUDA backend module, loaded only when a rank asks for a GPU,
 * so for them the versions of the headers it was compiled against are printed (configure
 * reads them), with the module's path. */
#include "build_config.h"

#include <stdio.h>
#include <string.h>

#include <hdf5.h>
#ifdef HAVE_MPI
#include <mpi.h>
#endif
#ifdef HAVE_PMIX
#include <pmix.h>
#endif
#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef HAVE_CUDA_BACKEND
#include "device/plugin.h"
#endif

#include "version.h"

#if defined(HAVE_MPI) || defined(HAVE_PMIX)
/* The first line of a library's self-description, cut at `stop` (its build details follow). */
static void print_first_part(FILE *out, const char *label, const char *s, const char *stop) {
    size_t n = strcspn(s, "\n");
    const char *cut = strstr(s, stop);
    if (cut && (size_t)(cut - s) < n) n = (size_t)(cut - s);
    fprintf(out, "%s: %.*s\n", label, (int)n, s);
}
#endif

void version_print(FILE *out, const char *progname) {
    fprintf(out, "%s %s\n", progname, PACKAGE_VERSION);

#ifdef HAVE_DNNL
    fprintf(out, "backend cpu: oneDNN convolutions\n");
#else
    fprintf(out, "backend cpu: reference convolutions (built without oneDNN)\n");
#endif
#ifdef HAVE_CUDA_BACKEND
    char path[4096];
    plugin_cuda_path(path, sizeof path);
    fprintf(out, "backend cuda: module %s\n", path);
#else
    fprintf(out, "backend cuda: not built\n");
#endif
    fprintf(out, "collectives: %s%s\n",
#ifdef HAVE_MPI
            "mpi",
#else
            "single rank only (built without MPI)",
#endif
#ifdef HAVE_CUDA_BACKEND
            ", nccl (GPU ranks)"
#else
            ""
#endif
    );

    unsigned maj = 0, min = 0, rel = 0;
    if (H5get_libversion(&maj, &min, &rel) >= 0) fprintf(out, "HDF5: %u.%u.%u\n", maj, min, rel);
#ifdef HAVE_MPI
    /* One of the few MPI calls allowed before MPI_Init. */
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(mpi, &len) == MPI_SUCCESS) print_first_part(out, "MPI", mpi, ",");
#else
    fprintf(out, "MPI: not built\n");
#endif
#ifdef HAVE_PMIX
    print_first_part(out, "PMIx", PMIx_Get_version(), " (");
#else
    fprintf(out, "PMIx: not built\n");
#endif
#ifdef HAVE_DNNL
    const dnnl_version_t *d = dnnl_version();
    fprintf(out, "oneDNN: %d.%d.%d\n", d->major, d->minor, d->patch);
#else
    fprintf(out, "oneDNN: not built\n");
#endif
#ifdef HAVE_CUDA_BACKEND
    fprintf(out, "CUDA: %s, cuDNN: %s, NCCL: %s (headers the module was built with)\n",
            DDP_CUDA_HEADER_VERSION, DDP_CUDNN_HEADER_VERSION, DDP_NCCL_HEADER_VERSION);
#else
    fprintf(out, "CUDA, cuDNN, NCCL: not built\n");
#endif
}
