/* SPDX-License-Identifier: BSD-3-Clause */
/* data_tool.c - ddptrain-data: make, convert, check and reshard datasets in the shard format
 * of data/README.md.
 *
 *   ddptrain-data synth   --out DIR [--train N] [--test N] [--shards S] [--seed X] [--size P]
 *   ddptrain-data cifar10 --in DIR --out DIR [--shards S]
 *   ddptrain-data cifar100 --in DIR --out DIR [--shards S] [--coarse]
 *   ddptrain-data import  --in DIR --out DIR [--size S] [--test_fraction F] [--shards S] [--threads N]
 *   ddptrain-data inspect FILE|DIR...
 *   ddptrain-data reshard --in DIR --out DIR --shards S
 *
 * Each command is a file of src/data_cmd/; this one holds their table, from which --help's
 * list of commands (and so the manual page's) is made.
 *
 * Exit status: 0 success, 1 bad data or I/O failure, 2 bad command line. */
#include "build_config.h"

#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "data/shards.h"
#include "data_cmd/data_cmd.h"

typedef struct {
    const char *name;
    const char *help;   /* one line, for --help */
    int (*run)(int argc, char **argv);
} Command;

static const Command commands[] = {
    {"synth", "generate the procedural 10-class dataset", cmd_synth},
    {"cifar10", "convert the CIFAR-10 binary batches", cmd_cifar10},
    {"cifar100", "convert the CIFAR-100 binary release (fine or coarse labels)", cmd_cifar100},
    {"import", "convert JPEG/PNG images in class folders (torchvision's ImageFolder layout)", cmd_import},
    {"inspect", "validate shard files (or directories) and print a summary", cmd_inspect},
    {"reshard", "rewrite a dataset into a different number of shards", cmd_reshard},
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

static void usage(FILE *f) {
    fputs("usage: ddptrain-data COMMAND [flags]\n"
          "\n"
          "Datasets for ddptrain: directories of HDF5 shards <split>-NNNNN-of-MMMMM.h5 (split = train\n"
          "or test) holding 'images' uint8 [N,S,S,3] (or JPEG files: import --encoding jpeg) and\n"
          "'labels' [N]; see data/README.md.\n"
          "\n"
          "commands:\n", f);
    int width = 0;
    for (int i = 0; i < NCOMMANDS; i++)
        if ((int)strlen(commands[i].name) > width) width = (int)strlen(commands[i].name);
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-*s %s\n", width, commands[i].name, commands[i].help);
    fputs("\n"
          "'ddptrain-data COMMAND --help' describes a command's flags; 'ddptrain-data --version'\n"
          "prints the version.\n", f);
}

int main(int argc, char **argv) {
    g_progname = "ddptrain-data";
    shards_quiet_hdf5();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("ddptrain-data %s\n", PACKAGE_VERSION);
        return 0;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(cmd, commands[i].name) == 0) return commands[i].run(argc - 2, argv + 2);
    char names[256] = "";
    for (int i = 0; i < NCOMMANDS; i++)
        snprintf_check(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", commands[i].name);
    die_code(2, "unknown command '%s' (commands: %s; see ddptrain-data --help)", cmd, names);
}
