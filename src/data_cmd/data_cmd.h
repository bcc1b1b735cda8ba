/* SPDX-License-Identifier: BSD-3-Clause */
/* data_cmd.h - the commands of ddptrain-data, one file each (cmd_*.c), called by data_tool.c's
 * main() with the arguments after the command's name.
 *
 * Each returns the exit status: 0 success, 1 bad data or I/O failure (a command may also die
 * with 1), 2 bad command line (flags_usage_error, base/flags.h). */
#ifndef DDP_DATA_CMD_H
#define DDP_DATA_CMD_H

int cmd_synth(int argc, char **argv);
int cmd_cifar10(int argc, char **argv);
int cmd_cifar100(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_reshard(int argc, char **argv);

#endif
