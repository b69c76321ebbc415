/*
 * Spec intake (see intake.h): the rules every command that takes in a
 * revision shares, in one place and one order.
 *
 * Design decision: the intake decides, the callers act. It returns every
 * cluster the revision defines validly with a verdict, and the diagnostics
 * of everything else; the driver offers what is taken and audits the rest,
 * plan prints the same verdicts. Duplicates are found after the refusals,
 * as both callers always did: a cluster whose second definition was
 * refused for an unsupported field counts as defined once.
 */
#include <errno.h>
#include <stdlib.h>

#include "intake/intake.h"
#include "util/strmap.h"
#include "util/xalloc.h"

void intake_result_release(intake_result *r)
{
        if (!r)
                return;
        for (size_t i = 0; i < r->n; i++) {
                free(r->items[i].id);
                etcd_cluster_free(r->items[i].spec);
        }
        free(r->items);
        diag_list_release(&r->diags);
        *r = (intake_result){.diags = DIAG_LIST_INIT};
}

const intake_cluster *intake_find(const intake_result *r, const char *id)
{
        for (size_t i = 0; i < r->n; i++)
                if (streq(r->items[i].id, id))
                        return &r->items[i];
        return NULL;
}

/* Parse and validate every file (the files of a revision read together). */
static bool load(const intake_input *in, cluster_set *set, diag_list *diags)
{
        if (!in->rev)
                return spec_load_buffers(in->files, in->n_files, set, diags) < 0;
        const source_revision *rev = in->rev;
        spec_buffer *bufs = xcalloc(rev->n_files + 1, sizeof(*bufs));
        for (size_t i = 0; i < rev->n_files; i++)
                bufs[i] = (spec_buffer){.file = rev->files[i].path,
                                        .data = rev->files[i].content,
                                        .len = rev->files[i].len};
        bool errors = spec_load_buffers(bufs, rev->n_files, set, diags) < 0;
        free(bufs);
        return errors;
}

/* Each cluster once, in the order of its first definition; one defined twice is a duplicate. */
static void verdicts(cluster_set *set, intake_result *r)
{
        strmap first = STRMAP_INIT;
        for (size_t i = 0; i < set->n; i++) {
                char *id = etcd_cluster_id(set->items[i]);
                size_t at = 0;
                if (!strmap_put(&first, id, r->n) && strmap_get(&first, id, &at)) {
                        r->items[at].verdict = INTAKE_DUPLICATE;
                        free(id);
                        etcd_cluster_free(set->items[i]);
                        set->items[i] = NULL;
                        continue;
                }
                r->items = xgrow(r->items, &r->alloc, r->n + 1, sizeof(*r->items));
                r->items[r->n++] = (intake_cluster){
                    .id = id, .spec = TAKE_PTR(set->items[i]), .verdict = INTAKE_TAKEN};
        }
        strmap_release(&first);
        set->n = 0;
}

int spec_intake(const intake_input *in, intake_result *ret)
{
        if (!in || !ret || (!in->rev && in->n_files > 0 && !in->files))
                return -EINVAL;
        intake_result r = {.diags = DIAG_LIST_INIT};
        cluster_set set = {0};
        bool validate = in->mode == INTAKE_VALIDATE;

        r.errors = load(in, &set, &r.diags);
        if (spec_check_duplicates(&set, &r.diags) < 0)
                r.errors = true;
        if (validate) {
                /* A valid file that apply would refuse is still valid: a warning. */
                for (size_t i = 0; i < set.n; i++)
                        (void)spec_check_unsupported(set.items[i], SPEC_UNSUPPORTED_WARN, &r.diags);
        } else {
                if (spec_refuse_unsupported(&set, in->exists, in->userdata, &r.diags) < 0)
                        r.errors = true;
                if (spec_refuse_for_target(&set, in->caps & INTAKE_CAP_HOSTS_INVENTORY,
                                           in->caps & INTAKE_CAP_PVC_WRITER, &r.diags) < 0)
                        r.errors = true;
        }
        for (size_t i = 0; in->rev && i < in->rev->n_notes; i++)
                diag_add(&r.diags, DIAG_NOTE, in->rev->notes[i].path, 0, 0, "skipped: %s",
                         in->rev->notes[i].reason);

        verdicts(&set, &r);
        cluster_set_release(&set);
        *ret = r;
        return 0;
}
