# SPDX-License-Identifier: BSD-3-Clause
# ddp_versions.m4 - the versions of the CUDA libraries the CUDA backend module is compiled
# against, for `ddptrain --version`: the module is loaded only when a rank asks for a GPU, so
# the program itself cannot ask the libraries.
#
# DDP_CUDA_HEADER_VERSIONS: after the CUDA, cuDNN and NCCL checks; defines
# DDP_CUDA_HEADER_VERSION, DDP_CUDNN_HEADER_VERSION and DDP_NCCL_HEADER_VERSION (strings) when
# the module is built.
AC_DEFUN([DDP_CUDA_HEADER_VERSIONS], [
  AS_IF([test "x$ddp_cuda_backend" = xyes], [
    ddp_save_CPPFLAGS="$CPPFLAGS"
    CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS $CUDNN_CFLAGS $NCCL_CFLAGS"
    AC_COMPUTE_INT([ddp_cudart], [CUDART_VERSION], [#include <cuda_runtime_api.h>], [ddp_cudart=0])
    ddp_cuda_v="$((ddp_cudart / 1000)).$((ddp_cudart % 1000 / 10))"
    ddp_cudnn_v=unknown
    AC_COMPUTE_INT([ddp_cudnn_ma], [CUDNN_MAJOR], [#include <cudnn.h>], [ddp_cudnn_ma=])
    AC_COMPUTE_INT([ddp_cudnn_mi], [CUDNN_MINOR], [#include <cudnn.h>], [ddp_cudnn_mi=])
    AC_COMPUTE_INT([ddp_cudnn_pa], [CUDNN_PATCHLEVEL], [#include <cudnn.h>], [ddp_cudnn_pa=])
    AS_IF([test -n "$ddp_cudnn_ma"], [ddp_cudnn_v="$ddp_cudnn_ma.$ddp_cudnn_mi.$ddp_cudnn_pa"])
    ddp_nccl_v="not built"
    AS_IF([test "x$ddp_have_NCCL" = xyes], [
      ddp_nccl_v=unknown
      AC_COMPUTE_INT([ddp_nccl_ma], [NCCL_MAJOR], [#include <nccl.h>], [ddp_nccl_ma=])
      AC_COMPUTE_INT([ddp_nccl_mi], [NCCL_MINOR], [#include <nccl.h>], [ddp_nccl_mi=])
      AC_COMPUTE_INT([ddp_nccl_pa], [NCCL_PATCH], [#include <nccl.h>], [ddp_nccl_pa=])
      AS_IF([test -n "$ddp_nccl_ma"], [ddp_nccl_v="$ddp_nccl_ma.$ddp_nccl_mi.$ddp_nccl_pa"])])
    CPPFLAGS="$ddp_save_CPPFLAGS"
    AC_DEFINE_UNQUOTED([DDP_CUDA_HEADER_VERSION], ["$ddp_cuda_v"], [CUDA runtime headers of the CUDA module.])
    AC_DEFINE_UNQUOTED([DDP_CUDNN_HEADER_VERSION], ["$ddp_cudnn_v"], [cuDNN headers of the CUDA module.])
    AC_DEFINE_UNQUOTED([DDP_NCCL_HEADER_VERSION], ["$ddp_nccl_v"], [NCCL headers of the CUDA module.])])
])
