#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# help2roff.sh - a program's --help text as a roff block for its manual page, so that the page
# says what the program itself says.
#
#   help2roff.sh TITLE COMMAND [ARG...]
#
# Prints ".SS TITLE" (none when TITLE is empty) and the output of COMMAND ARG... (which must
# exit 0) as literal lines. Exit status: 0, or 1 when COMMAND fails.
set -u
title=$1; shift
out=$("$@") || { echo "help2roff.sh: '$*' failed" >&2; exit 1; }
[ -n "$title" ] && printf '.SS %s\n' "$title"
printf '.PP\n.nf\n'
# roff: a backslash and hyphens escaped, no line starting with a control character.
printf '%s\n' "$out" | sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^[.']/\\\\\\&&/"
printf '.fi\n'
