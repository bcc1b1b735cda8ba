/* SPDX-License-Identifier: BSD-3-Clause */
/* netfile.h - networks as JSON files (--model FILE), and any network written as one.
 *
 *   {"network": "resnet18", "init": "resnet", "nodes": [
 *     {"name": "conv1", "kind": "conv", "in": "input", "out_channels": 64, "kernel": 7, "stride": 2, "padding": 3},
 *     {"name": "bn1", "kind": "bn", "in": "conv1"},
 *     ...
 *     {"name": "fc", "kind": "linear", "in": "avgpool"}]}
 *
 * Each node is a flat object: "name" (the state_dict prefix of its tensors, letters, digits,
 * '_', '.' and '-'), "kind" (node_kind.h), "in" (an earlier node's name or "input"; default the
 * node before), and the fields of its kind, with their defaults, as the kind's record in
 * node_kind.h gives them (docs/networks.md prints that table). "init" is "pytorch" (the
 * default) or "resnet" (torchvision's ResNet initialisation). docs/networks.md has more. */
#ifndef DDP_NETFILE_H
#define DDP_NETFILE_H

#include <stdio.h>

#include "netspec.h"

/* Reads the file at path into s (initialised here). Returns 0, or -1 with one line in err
 * naming the file, the node and the field; s is then empty. Shapes are not checked here
 * (netspec_resolve does, for an image size and a class count). */
int netfile_read(const char *path, NetSpec *s, char *err, size_t errlen);
/* The same from text, named `what` in messages. */
int netfile_parse(const char *text, size_t len, const char *what, NetSpec *s, char *err, size_t errlen);

/* The network --model names: a built-in of zoo.h (width and blocks shape MiniResNet), or a
 * file, which is a path with a '/' or a name ending in ".json" (a misspelt built-in is then
 * told as such). Returns 0, or -1 with one line in err. */
int netfile_load(const char *model, int width, int blocks, NetSpec *s, char *err, size_t errlen);

/* s as a file netfile_read takes back: one node per line. */
void netfile_write(FILE *f, const NetSpec *s);

#endif
