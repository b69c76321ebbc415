/*
 * The revision diff's fuzz target (plan/revdiff.h): the input is two
 * revisions' YAML, split at the first line "---8<---"; both are diffed
 * (every cluster planned, the unified diff of the normalized specs made),
 * printed as text and as JSON, and released, so LeakSanitizer checks every
 * path. The diff must hold together: the counts add up to the clusters
 * listed, every diff line is a hunk header, a context, a removed or an
 * added line, and a revision diffed with itself has no changes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/revdiff.h"
#include "util/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CUT "\n---8<---\n"

static source_revision *revision(const char *commit, const char *text, size_t len)
{
        source_revision *r = XNEW(source_revision);
        r->repository = xstrdup("fuzz");
        snprintf(r->commit_id, sizeof(r->commit_id), "%s", commit);
        r->files = xcalloc(1, sizeof(source_file));
        r->files[0] = (source_file){
            .path = xstrdup("clusters.yaml"), .content = xstrndup(text, len), .len = len};
        r->n_files = 1;
        return r;
}

static void check(const revdiff *d, const source_revision *a, const source_revision *b)
{
        if ((size_t)(d->n_added + d->n_removed + d->n_changed + d->n_refused + d->n_unchanged) !=
            d->n)
                abort();
        for (size_t i = 0; i < d->n; i++)
                for (size_t k = 0; k < d->items[i].n_lines; k++)
                        if (!strchr(" -+@", d->items[i].lines[k][0]))
                                abort();
        FILE *null = fopen("/dev/null", "w");
        if (!null)
                abort();
        revdiff_print_opts o = {.verbose = true, .lines = true, .steps = true};
        revdiff_print_text(d, a, b, &o, null);
        json_t *j = revdiff_to_json(d, a, b);
        json_dumpf(j, null, JSON_INDENT(2));
        json_decref(j);
        fclose(null);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > 64 * 1024)
                return 0;
        char *text = xstrndup((const char *)data, size);
        size_t len = strlen(text); /* up to the first NUL */
        char *cut = strstr(text, CUT);
        size_t la = cut ? (size_t)(cut - text) : len;
        const char *tb = cut ? cut + strlen(CUT) : "";
        source_revision *a = revision("1111111111111111111111111111111111111111", text, la);
        source_revision *b = revision("2222222222222222222222222222222222222222", tb, strlen(tb));
        revdiff_input in = {.from = a, .to = b};
        revdiff *d = NULL;
        if (revdiff_compute(&in, &d) < 0)
                abort();
        check(d, a, b);
        revdiff_free(d);
        /* the same revision on both sides: nothing added, removed or changed */
        revdiff_input same = {.from = a, .to = a};
        if (revdiff_compute(&same, &d) < 0 || revdiff_has_changes(d))
                abort();
        revdiff_free(d);
        source_revision_free(a);
        source_revision_free(b);
        free(text);
        return 0;
}
