/* SPDX-License-Identifier: BSD-3-Clause */
/* diagnose.c - ddptrain-diagnose: what the flight records of a job say about how it ended.
 *
 *   ddptrain-diagnose JOB_DIR
 *
 * Reads JOB_DIR/flight/rank-*.txt (flight.h), prints the verdict of verdict.h on the first
 * line, then one line per rank. Exit status: 0 no fault recorded, 1 a fault named, 2 a bad
 * command line or job directory (missing, no flight records, a corrupt record). */
#include "build_config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "dist/flight.h"
#include "base/util.h"
#include "dist/verdict.h"

static const char *USAGE =
    "usage: ddptrain-diagnose JOB_DIR\n"
    "\n"
    "Reads the flight records that the ranks of a ddptrain job wrote into JOB_DIR/flight when\n"
    "the job went wrong (a collective timed out, a fatal signal, an abort): each rank's last 64\n"
    "collectives with their step, bucket, size, posted and completed times. Prints the verdict\n"
    "on the first line: which rank never posted which collective and which ranks waited for it\n"
    "since when, which rank sent no record (stopped, killed or cut off), which ranks disagree on\n"
    "the sequence of collectives, which rank died of a signal or ended the job, or that no fault\n"
    "is recorded. Then one line per rank: its host, pid, when and why it wrote its record, and\n"
    "the collective it was in.\n"
    "\n"
    "exit status: 0 no fault recorded, 1 a fault named, 2 a bad command line or job directory\n"
    "(missing, no flight records, a corrupt record).\n";

int main(int argc, char **argv) {
    g_progname = "ddptrain-diagnose";
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(USAGE, stdout);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        printf("ddptrain-diagnose %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (argc != 2 || argv[1][0] == '-' || !argv[1][0])
        die_code(2, "usage: ddptrain-diagnose JOB_DIR (see ddptrain-diagnose --help)");
    const char *job = argv[1];
    struct stat st;
    if (stat(job, &st) != 0) die_code(2, "%s: %s", job, strerror(errno));
    if (!S_ISDIR(st.st_mode)) die_code(2, "%s: not a directory", job);
    char dir[4200];
    if (snprintf(dir, sizeof dir, "%s/" FLIGHT_SUBDIR, job) >= (int)sizeof dir) die_code(2, "%s: name too long", job);
    if (stat(dir, &st) != 0)
        die_code(2, "%s: no flight records (no %s/ directory: no rank of this job wrote one)", job, FLIGHT_SUBDIR);
    FlightSet s;
    char err[4600];
    if (flight_set_load(&s, dir, 1, err, sizeof err) != 0) die_code(2, "%s", err);
    char line[2048];
    int fault = verdict_judge(&s, line, sizeof line);
    printf("%s\n", line);
    for (int q = 0; q < s.world_size; q++) {
        verdict_rank_line(&s, q, line, sizeof line);
        printf("  %s\n", line);
    }
    flight_set_free(&s);
    return fault ? 1 : 0;
}
