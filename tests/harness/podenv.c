/*
 * $(VAR) expansion of a container's env values, command and args, the way
 * the kubelet does it (see podenv.h). Kept apart from the simulator so it
 * is tested on its own: the rules are small but easy to get subtly wrong
 * ("$$", an undefined name, an unclosed reference).
 */
#include "tests/harness/podenv.h"

#include <stdlib.h>
#include <string.h>

#include "util/strbuf.h"
#include "util/xalloc.h"

const char *podenv_get(char *const *vars, size_t n, const char *name)
{
        size_t len = strlen(name);

        for (size_t i = n; i > 0; i--) {
                const char *v = vars[i - 1];
                if (strncmp(v, name, len) == 0 && v[len] == '=')
                        return v + len + 1;
        }
        return NULL;
}

char *podenv_expand(const char *in, char *const *vars, size_t n)
{
        strbuf sb = STRBUF_INIT;
        const char *p = in;

        while (*p) {
                if (p[0] != '$' || !p[1]) {
                        sb_append_len(&sb, p, 1);
                        p++;
                        continue;
                }
                if (p[1] == '$') {
                        sb_append_len(&sb, "$", 1);
                        p += 2;
                        continue;
                }
                if (p[1] == '(') {
                        const char *close = strchr(p + 2, ')');
                        if (close) {
                                char *name = xstrndup(p + 2, (size_t)(close - (p + 2)));
                                const char *value = podenv_get(vars, n, name);
                                if (value)
                                        sb_append(&sb, value);
                                else
                                        sb_append_len(&sb, p, (size_t)(close - p) + 1);
                                free(name);
                                p = close + 1;
                                continue;
                        }
                }
                sb_append_len(&sb, p, 1);
                p++;
        }
        return sb_detach(&sb);
}
