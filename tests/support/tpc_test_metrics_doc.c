/*
 * docs/metrics.md read as the list of metric families: each table row whose first cell is a
 * `twopc_...` name gives its type and unit in the next cells.
 */
#include "tpc_test_metrics_doc.h"

#include <stdio.h>
#include <string.h>

/* The trimmed content of cell @i (0-based) of table row @line, into @out. */
static void cell(const char *line, int i, char *out, size_t cap)
{
    out[0] = 0;
    const char *p = line;
    for (int k = 0; k <= i; k++) {
        p = strchr(p, '|');
        if (!p)
            return;
        p++;
    }
    const char *end = strchr(p, '|');
    if (!end)
        return;
    while (p < end && (*p == ' ' || *p == '`'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '`'))
        end--;
    snprintf(out, cap, "%.*s", (int)(end - p), p);
}

int tpc_test_metrics_doc_read(tpc_test_metric_doc_t *out, int cap)
{
    FILE *f = fopen("docs/metrics.md", "r");
    if (!f)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "| `twopc_", 9) != 0)
            continue;
        tpc_test_metric_doc_t d;
        cell(line, 0, d.name, sizeof d.name);
        cell(line, 1, d.type, sizeof d.type);
        cell(line, 2, d.unit, sizeof d.unit);
        if (n < cap)
            out[n] = d;
        n++;
    }
    fclose(f);
    return n;
}

bool tpc_test_metrics_doc_check(const char *text, char *why, size_t cap)
{
    static tpc_test_metric_doc_t doc[256];
    int n = tpc_test_metrics_doc_read(doc, 256);
    if (n <= 0 || n > 256) {
        snprintf(why, cap, "docs/metrics.md: %d families", n);
        return false;
    }
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char name[96], type[16];
        if (sscanf(l, "# TYPE %95s %15s", name, type) != 2 || strncmp(name, "twopc_", 6) != 0)
            continue;
        int found = -1;
        for (int i = 0; i < n && found < 0; i++)
            if (strcmp(doc[i].name, name) == 0)
                found = i;
        if (found < 0) {
            snprintf(why, cap, "docs/metrics.md does not list %s", name);
            return false;
        }
        if (strcmp(doc[found].type, type) != 0) {
            snprintf(why, cap, "docs/metrics.md: %s is a %s, not a %s", name, type,
                     doc[found].type);
            return false;
        }
    }
    return true;
}
