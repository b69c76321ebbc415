/*
 * The source_revision type (see revision.h and source.h): building it up,
 * sorting it, copying its description and releasing it.
 *
 * Design decision: the limit on notes lives here, in the one function that
 * adds them, so that every reader (a Git tree, a plain directory) is bounded
 * the same way without counting by itself.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sources/revision.h"
#include "util/xalloc.h"

bool source_name_is_yaml(const char *name)
{
        size_t n = strlen(name);

        return (n > 5 && streq(name + n - 5, ".yaml")) || (n > 4 && streq(name + n - 4, ".yml"));
}

void revision_add_file(source_revision *r, const char *path, char *content, size_t len)
{
        r->files = xrealloc(r->files, (r->n_files + 1) * sizeof(*r->files));
        r->files[r->n_files++] = (source_file){xstrdup(path), content, len};
}

void revision_add_note(source_revision *r, const char *path, const char *reason_fmt, ...)
{
        va_list ap;

        if (r->n_notes >= SOURCE_MAX_NOTES) {
                r->notes_omitted++;
                return;
        }
        va_start(ap, reason_fmt);
        r->notes = xrealloc(r->notes, (r->n_notes + 1) * sizeof(*r->notes));
        r->notes[r->n_notes++] = (source_note){xstrdup(path), xvasprintf(reason_fmt, ap)};
        va_end(ap);
}

static int cmp_file(const void *a, const void *b)
{
        return strcmp(((const source_file *)a)->path, ((const source_file *)b)->path);
}

static int cmp_note(const void *a, const void *b)
{
        return strcmp(((const source_note *)a)->path, ((const source_note *)b)->path);
}

void revision_sort(source_revision *r)
{
        if (r->n_files > 1)
                qsort(r->files, r->n_files, sizeof(*r->files), cmp_file);
        if (r->n_notes > 1)
                qsort(r->notes, r->n_notes, sizeof(*r->notes), cmp_note);
        if (r->notes_omitted > 0) {
                /* Last, after sorting: it sums up the notes not listed. */
                r->notes = xrealloc(r->notes, (r->n_notes + 1) * sizeof(*r->notes));
                r->notes[r->n_notes++] = (source_note){
                    xstrdup("..."),
                    xasprintf("%zu more skipped entries (only the first %u are listed)",
                              r->notes_omitted, SOURCE_MAX_NOTES)};
                r->notes_omitted = 0;
        }
}

static void person_copy(source_person *dst, const source_person *src)
{
        *dst = *src;
        dst->name = xstrdup_null(src->name);
        dst->email = xstrdup_null(src->email);
}

source_revision *revision_copy_header(const source_revision *r)
{
        source_revision *c = XNEW(source_revision);

        c->repository = xstrdup_null(r->repository);
        c->ref = xstrdup_null(r->ref);
        memcpy(c->commit_id, r->commit_id, sizeof(c->commit_id));
        person_copy(&c->author, &r->author);
        person_copy(&c->committer, &r->committer);
        c->message = xstrdup_null(r->message);
        c->signature_checked = r->signature_checked;
        c->signature_verified = r->signature_verified;
        c->signature_reason = xstrdup_null(r->signature_reason);
        c->signer_fingerprint = xstrdup_null(r->signer_fingerprint);
        c->signer_identity = xstrdup_null(r->signer_identity);
        c->refusal = xstrdup_null(r->refusal);
        return c;
}

static void person_release(source_person *p)
{
        free(p->name);
        free(p->email);
}

void source_revision_free(source_revision *r)
{
        if (!r)
                return;
        free(r->repository);
        free(r->ref);
        person_release(&r->author);
        person_release(&r->committer);
        free(r->message);
        free(r->signature_reason);
        free(r->signer_fingerprint);
        free(r->signer_identity);
        free(r->refusal);
        for (size_t i = 0; i < r->n_files; i++) {
                free(r->files[i].path);
                free(r->files[i].content);
        }
        free(r->files);
        for (size_t i = 0; i < r->n_notes; i++) {
                free(r->notes[i].path);
                free(r->notes[i].reason);
        }
        free(r->notes);
        free(r);
}
