/* SPDX-License-Identifier: BSD-3-Clause */
/* node_kinds_doc.c - prints the table of node kinds (src/model/node_kind.h) as the Markdown
 * table of docs/networks.md, for tests/test_node_kinds.sh to compare with the page. */
#include <stdio.h>

#include "model/node_kind.h"

int main(void) {
    node_kinds_write_doc(stdout);
    return 0;
}
