#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The CUDA backend leaves NULL the operations that have not run on a GPU (a ReLU outside a batch
# norm, max pooling, the blur, the activation functions, the squeeze-excitation multiply,
# dropout, stochastic depth, a convolution's bias, the batch norm fused with an activation, the joins, pools and norms of torchvision's other
# families: concat, split, channel shuffle, flatten, windowed and adaptive average pools, layer
# norm, layer scale, transform_input) and takes no grouped or dilated convolution: read
# from src/cuda/backend_cuda.c's table, they are the ones tests/test_refusals removes from the
# CPU backend to try every built-in network as the GPU would (one line each, before anything
# is allocated; the networks of ResNet's kinds taken). Made to fail on a table that sets one.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
SRC="$top_srcdir/src/cuda/backend_cuda.c"
MEMBERS="relu_forward maxpool_forward maxpool_backward blur act_forward act_backward mul_forward mul_backward dropout_mask dropout_apply sample_scale bias_add bias_grad
bn_apply_act bn_backward_reduce_act channel_copy channel_shuffle transpose channel_scale_forward channel_scale_backward
channel_affine avgpool2d_forward avgpool2d_backward adaptive_avgpool_forward adaptive_avgpool_backward layernorm_forward
layernorm_backward"

# cuda_sets FILE MEMBER: the file's table gives MEMBER a value other than NULL
cuda_sets() { grep -Eq "^[[:space:]]*\.$2[[:space:]]*=[[:space:]]*[A-Za-z_]" "$1" && ! grep -Eq "^[[:space:]]*\.$2[[:space:]]*=[[:space:]]*NULL" "$1"; }

set_ones=""
for m in $MEMBERS; do cuda_sets "$SRC" "$m" && set_ones="$set_ones $m"; done
[ -z "$set_ones" ] && ok "the CUDA backend sets none of:$(echo " $MEMBERS" | tr '\n' ' ')" ||
    bad "the CUDA backend sets$set_ones: tests/test_refusals.c no longer tries what it lacks"
grep -Eq '^[[:space:]]*\.conv_grouped[[:space:]]*=[[:space:]]*0' "$SRC" && ok "the CUDA backend takes no grouped convolution" ||
    bad "the CUDA backend's conv_grouped is not 0"
# the check can fail: a copy of the table that sets one
sed 's/^\([[:space:]]*\)\.bias_add = NULL,/\1.bias_add = cuda_bias_add,/' "$SRC" >"$TMP/b.c"
cuda_sets "$TMP/b.c" bias_add && ok "a table that sets bias_add is seen" || bad "a table that sets bias_add is not seen"

if "$top_builddir/tests/test_refusals" >"$TMP/r.out" 2>&1; then
    ok "$(tail -n 2 "$TMP/r.out" | head -n 1)"
else
    bad "test_refusals"; grep FAIL "$TMP/r.out" | head
fi
finish
