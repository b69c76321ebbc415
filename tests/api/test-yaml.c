/*
 * Tests for the YAML loader and emitter (api/yaml.c): source positions,
 * multiple documents, every input limit (including a "billion laughs"
 * file), duplicate keys, syntax errors with their exact location text,
 * merge keys and aliases, the YAML 1.2 core schema, and the emitter's
 * exact output and round trips through the loader.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/yaml.h"
#include "util/xalloc.h"

/* A parse result that a test inspects and then releases. */
typedef struct parsed {
        int r;
        ydoc_list docs;
        diag_list diags;
} parsed;

static parsed *parse_lim(const char *text, size_t len, const yaml_limits *lim)
{
        parsed *p = XNEW(parsed);
        p->r = yaml_parse("t.yaml", text, len, lim, &p->docs, &p->diags);
        return p;
}

static parsed *parse(const char *text)
{
        return parse_lim(text, strlen(text), NULL);
}

static void parsed_free(parsed *p)
{
        ydoc_list_release(&p->docs);
        diag_list_release(&p->diags);
        free(p);
}

/* All diagnostics, one per line, in the canonical text form. */
static char *diags_text(const diag_list *l)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < l->n; i++) {
                char *s = diag_format(&l->items[i]);
                sb_printf(&sb, "%s\n", s);
                free(s);
        }
        return sb_detach(&sb);
}

static void assert_diags(const parsed *p, const char *expected)
{
        char *s = diags_text(&p->diags);
        if (!streq(s, expected))
                fprintf(stderr, "expected:\n%sgot:\n%s", expected, s);
        assert_string_equal(s, expected);
        free(s);
}

/* The root of document i as compact JSON. */
static char *doc_json(const parsed *p, size_t i)
{
        json_t *j = ynode_to_json(p->docs.docs[i].root);
        char *s = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
        json_decref(j);
        return s;
}

static void assert_json(const char *yaml, const char *json)
{
        parsed *p = parse(yaml);
        if (p->r != 0) {
                char *d = diags_text(&p->diags);
                fprintf(stderr, "%s", d);
                free(d);
        }
        assert_int_equal(p->r, 0);
        assert_int_equal(p->docs.n, 1);
        char *s = doc_json(p, 0);
        if (!streq(s, json))
                fprintf(stderr, "yaml: %s\nexpected: %s\ngot:      %s\n", yaml, json, s);
        assert_string_equal(s, json);
        free(s);
        parsed_free(p);
}

static void test_positions(void **state)
{
        parsed *p = parse("# a comment\n"
                          "apiVersion: gitcd.io/v1alpha1\n"
                          "spec:\n"
                          "  replicas: 3\n"
                          "  members:\n"
                          "    - name: a\n"
                          "    - [x, \"y\"]\n"
                          "  tls: {enabled: true}\n");
        assert_int_equal(p->r, 0);
        assert_int_equal(p->docs.n, 1);
        ydoc *d = &p->docs.docs[0];
        assert_string_equal(d->file, "t.yaml");
        assert_int_equal(d->index, 0);
        assert_int_equal(d->line, 2);
        ynode *root = d->root;
        assert_int_equal(root->kind, YNODE_MAP);
        assert_int_equal(root->keys[0]->line, 2);
        assert_int_equal(root->keys[0]->col, 1);
        assert_int_equal(root->values[0]->line, 2);
        assert_int_equal(root->values[0]->col, 13);

        ynode *spec = ynode_get(root, "spec");
        assert_non_null(spec);
        ynode *replicas = ynode_get(spec, "replicas");
        assert_int_equal(replicas->line, 4);
        assert_int_equal(replicas->col, 13);
        assert_string_equal(replicas->str, "3");
        assert_false(replicas->quoted);

        ynode *members = ynode_get(spec, "members");
        assert_int_equal(members->kind, YNODE_SEQ);
        assert_int_equal(members->n, 2);
        assert_int_equal(members->values[0]->line, 6);
        assert_int_equal(members->values[0]->col, 7);
        ynode *flow = members->values[1];
        assert_int_equal(flow->line, 7);
        assert_int_equal(flow->col, 7);
        assert_int_equal(flow->values[1]->col, 11);
        assert_true(flow->values[1]->quoted);

        ynode *enabled = ynode_get(ynode_get(spec, "tls"), "enabled");
        assert_int_equal(enabled->line, 8);
        assert_int_equal(enabled->col, 18);
        assert_null(ynode_get(spec, "absent"));
        assert_null(ynode_get(replicas, "x"));
        parsed_free(p);
}

static void test_multi_document(void **state)
{
        parsed *p = parse("a: 1\n"
                          "---\n"
                          "---\n"
                          "# only a comment\n"
                          "...\n"
                          "--- hello\n"
                          "---\n"
                          "- 1\n");
        assert_int_equal(p->r, 0);
        assert_int_equal(p->docs.n, 5);
        assert_non_null(p->docs.docs[0].root);
        assert_null(p->docs.docs[1].root);
        assert_null(p->docs.docs[2].root);
        assert_string_equal(p->docs.docs[3].root->str, "hello");
        assert_int_equal(p->docs.docs[3].index, 3);
        assert_int_equal(p->docs.docs[3].line, 6);
        assert_int_equal(p->docs.docs[4].root->kind, YNODE_SEQ);
        assert_int_equal(p->docs.docs[4].line, 7);
        parsed_free(p);

        /* An empty buffer or only comments: no documents at all. */
        p = parse("");
        assert_int_equal(p->r, 0);
        assert_int_equal(p->docs.n, 0);
        parsed_free(p);
        p = parse("# nothing\n");
        assert_int_equal(p->r, 0);
        assert_int_equal(p->docs.n, 0);
        parsed_free(p);
}

static void test_limit_file_bytes(void **state)
{
        yaml_limits lim = yaml_default_limits;
        lim.max_file_bytes = 10;
        const char *text = "a: 1\nb: 22\nc: 3\n";
        parsed *p = parse_lim(text, strlen(text), &lim);
        assert_int_equal(p->r, -EINVAL);
        assert_int_equal(p->docs.n, 0);
        assert_diags(p, "t.yaml:2:6: error: file is larger than 10 bytes (size limit)\n");
        parsed_free(p);

        char path[] = "/tmp/gitcd-test-yaml-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
        ydoc_list docs = {0};
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(yaml_load_file(path, &lim, &docs, &diags), -EFBIG);
        assert_int_equal(docs.n, 0);
        assert_int_equal(diags.n, 1);
        assert_int_equal(diags.items[0].line, 2);
        assert_non_null(strstr(diags.items[0].message, "larger than 10 bytes"));
        diag_list_release(&diags);

        /* Within the limit, the same file loads. */
        assert_int_equal(yaml_load_file(path, NULL, &docs, &diags), 0);
        assert_int_equal(docs.n, 1);
        assert_string_equal(docs.docs[0].file, path);
        assert_int_equal(diags.n, 0);
        ydoc_list_release(&docs);
        unlink(path);

        assert_int_equal(yaml_load_file("/nonexistent/x.yaml", NULL, &docs, &diags), -ENOENT);
        assert_int_equal(diags.n, 1);
        assert_string_equal(diags.items[0].file, "/nonexistent/x.yaml");
        assert_non_null(strstr(diags.items[0].message, "No such file"));
        diag_list_release(&diags);
        assert_int_equal(yaml_load_file("/", NULL, &docs, &diags), -EISDIR);
        assert_int_equal(docs.n, 0);
        assert_int_equal(diags.n, 1);
        diag_list_release(&diags);
}

static void test_limit_documents(void **state)
{
        yaml_limits lim = yaml_default_limits;
        lim.max_documents = 3;
        const char *text = "--- 1\n--- 2\n--- 3\n--- 4\n--- 5\n";
        parsed *p = parse_lim(text, strlen(text), &lim);
        assert_int_equal(p->r, -EINVAL);
        /* Documents before the limit are kept. */
        assert_int_equal(p->docs.n, 3);
        assert_diags(p, "t.yaml:4:1: error: more than 3 documents in one file (document limit)\n");
        parsed_free(p);

        /* The default: 1000. */
        strbuf sb = STRBUF_INIT;
        for (int i = 0; i < 1001; i++)
                sb_append(&sb, "---\nx: 1\n");
        p = parse_lim(sb.buf, sb.len, NULL);
        assert_int_equal(p->r, -EINVAL);
        assert_int_equal(p->docs.n, 1000);
        assert_diags(p, "t.yaml:2001:1: error: more than 1000 documents in one file (document "
                        "limit)\n");
        parsed_free(p);
        sb_release(&sb);
}

static void test_limit_depth(void **state)
{
        strbuf sb = STRBUF_INIT;
        for (int i = 0; i < 64; i++)
                sb_appendc(&sb, '[');
        for (int i = 0; i < 64; i++)
                sb_appendc(&sb, ']');
        parsed *p = parse(sb_str(&sb));
        assert_int_equal(p->r, 0); /* 64 levels are fine */
        parsed_free(p);

        sb_reset(&sb);
        for (int i = 0; i < 10000; i++)
                sb_appendc(&sb, '[');
        p = parse(sb_str(&sb));
        assert_int_equal(p->r, -EINVAL);
        assert_int_equal(p->docs.n, 0);
        assert_diags(p, "t.yaml:1:65: error: nesting deeper than 64 levels (depth limit)\n");
        parsed_free(p);

        /* Block style, with a smaller limit. */
        yaml_limits lim = yaml_default_limits;
        lim.max_depth = 2;
        const char *text = "a:\n  b:\n    c: 1\n";
        p = parse_lim(text, strlen(text), &lim);
        assert_int_equal(p->r, -EINVAL);
        assert_diags(p, "t.yaml:3:5: error: nesting deeper than 2 levels (depth limit)\n");
        parsed_free(p);

        /* An alias can nest deeper than what is written: counted after expansion. */
        lim.max_depth = 4;
        text = "a: &a [[1]]\nb: [[*a]]\n";
        p = parse_lim(text, strlen(text), &lim);
        assert_int_equal(p->r, -EINVAL);
        assert_diags(p, "t.yaml:2:6: error: nesting deeper than 4 levels (depth limit)\n");
        parsed_free(p);
        sb_release(&sb);
}

static void test_limit_nodes(void **state)
{
        yaml_limits lim = yaml_default_limits;
        lim.max_nodes = 5;
        const char *text = "[1, 2, 3, 4]\n";
        parsed *p = parse_lim(text, strlen(text), &lim);
        assert_int_equal(p->r, 0);
        parsed_free(p);
        text = "[1, 2, 3, 4, 5]\n";
        p = parse_lim(text, strlen(text), &lim);
        assert_int_equal(p->r, -EINVAL);
        assert_diags(p, "t.yaml:1:14: error: file has more than 5 nodes (node limit)\n");
        parsed_free(p);

        lim.max_nodes = 10;
        text = "a: &a [1, 2, 3]\nb: *a\nc: *a\n";
        p = parse_lim(text, strlen(text), &lim);
        assert_int_equal(p->r, -EINVAL);
        assert_diags(p, "t.yaml:2:4: error: document expands to more than 10 nodes (alias "
                        "expansion limit)\n");
        parsed_free(p);
}

/* One budget spent by several files: each within its own limits, too much together. */
static void test_budget(void **state)
{
        yaml_budget b = {.max_nodes = 10, .max_aliases = 100, .max_bytes = 1000};
        ydoc_list docs = {0};
        diag_list diags = DIAG_LIST_INIT;
        const char *four = "[1, 2, 3]\n"; /* four nodes */
        assert_int_equal(yaml_parse_budget("a.yaml", four, strlen(four), NULL, &b, &docs, &diags),
                         0);
        assert_int_equal(yaml_parse_budget("b.yaml", four, strlen(four), NULL, &b, &docs, &diags),
                         0);
        assert_int_equal(b.nodes, 8);
        assert_int_equal(yaml_parse_budget("c.yaml", four, strlen(four), NULL, &b, &docs, &diags),
                         -EINVAL);
        assert_true(b.spent);
        assert_int_equal(diags.n, 1);
        _cleanup_free_ char *msg = diag_format(&diags.items[0]);
        assert_string_equal(msg, "c.yaml:1:5: error: the YAML files of this revision hold more "
                                 "than 10 nodes in all, after alias expansion (revision budget)");
        /* spent: the next file is not parsed at all */
        assert_int_equal(yaml_parse_budget("d.yaml", "x", 1, NULL, &b, &docs, &diags), -EINVAL);
        assert_int_equal(diags.n, 1);
        assert_int_equal(docs.n, 2);
        ydoc_list_release(&docs);
        diag_list_release(&diags);

        /* aliases, and bytes of text after expansion */
        b = (yaml_budget){.max_nodes = 1000, .max_aliases = 3, .max_bytes = 1000};
        const char *aliases = "a: &a x\nb: [*a, *a, *a, *a]\n";
        assert_int_equal(
            yaml_parse_budget("e.yaml", aliases, strlen(aliases), NULL, &b, &docs, &diags),
            -EINVAL);
        msg = (free(msg), diag_format(&diags.items[0]));
        assert_string_equal(msg, "e.yaml:2:17: error: the YAML files of this revision use more "
                                 "than 3 aliases in all (revision budget)");
        diag_list_release(&diags);
        b = (yaml_budget){.max_nodes = 1000, .max_aliases = 1000, .max_bytes = 20};
        const char *text = "a: &a 0123456789\nb: [*a, *a]\n";
        assert_int_equal(yaml_parse_budget("f.yaml", text, strlen(text), NULL, &b, &docs, &diags),
                         -EINVAL);
        msg = (free(msg), diag_format(&diags.items[0]));
        assert_string_equal(msg, "f.yaml:2:5: error: the YAML files of this revision hold more "
                                 "than 20 bytes of text in all, after alias expansion (revision "
                                 "budget)");
        diag_list_release(&diags);
        ydoc_list_release(&docs);
}

static void test_billion_laughs(void **state)
{
        strbuf sb = STRBUF_INIT;
        sb_append(&sb, "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\","
                       "\"lol\"]\n");
        const char *names = "abcdefghi";
        for (int i = 1; i < 9; i++) {
                sb_printf(&sb, "%c: &%c [", names[i], names[i]);
                for (int k = 0; k < 9; k++)
                        sb_printf(&sb, "%s*%c", k ? "," : "", names[i - 1]);
                sb_append(&sb, "]\n");
        }
        parsed *p = parse(sb_str(&sb));
        assert_int_equal(p->r, -EINVAL);
        assert_int_equal(p->docs.n, 0);
        assert_diags(p, "t.yaml:7:8: error: document expands to more than 1000000 nodes (alias "
                        "expansion limit)\n");
        parsed_free(p);

        /* Large scalars repeated through aliases: bounded by text size too. */
        yaml_limits lim = yaml_default_limits;
        lim.max_file_bytes = 1024;
        sb_reset(&sb);
        sb_append(&sb, "a: &a \"");
        for (int i = 0; i < 900; i++)
                sb_appendc(&sb, 'x');
        sb_append(&sb, "\"\nb: [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n");
        p = parse_lim(sb.buf, sb.len, &lim);
        assert_int_equal(p->r, -EINVAL);
        assert_diags(p, "t.yaml:2:56: error: document expands to more than 16384 bytes of text "
                        "(alias expansion limit)\n");
        parsed_free(p);
        sb_release(&sb);
}

static void test_duplicate_keys(void **state)
{
        parsed *p = parse("apiVersion: v1\n"
                          "spec:\n"
                          "  replicas: 3\n"
                          "  version: 3.5.16\n"
                          "  'replicas': 5\n"
                          "kind: x\n"
                          "kind: y\n"
                          "---\n"
                          "good: 1\n"
                          "---\n"
                          "{a: 1, a: 2}\n");
        assert_int_equal(p->r, -EINVAL);
        /* Every duplicate is reported; the documents without errors are kept. */
        assert_diags(p, "t.yaml:5:3: error: duplicate key \"replicas\" (first defined at line 3)\n"
                        "t.yaml:7:1: error: duplicate key \"kind\" (first defined at line 6)\n"
                        "t.yaml:11:8: error: duplicate key \"a\" (first defined at line 11)\n");
        assert_int_equal(p->docs.n, 1);
        assert_int_equal(p->docs.docs[0].index, 1);
        assert_non_null(ynode_get(p->docs.docs[0].root, "good"));
        parsed_free(p);

        /* Keys in messages: control characters escaped, long keys shortened. */
        p = parse("\"a\\tb\": 1\n\"a\\tb\": 2\n"
                  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx: 1\n"
                  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx: 2\n");
        assert_int_equal(p->r, -EINVAL);
        assert_diags(p,
                     "t.yaml:2:1: error: duplicate key \"a\\x09b\" (first defined at line 1)\n"
                     "t.yaml:4:1: error: duplicate key "
                     "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\" (first "
                     "defined at line 3)\n");
        parsed_free(p);

        p = parse("? [a, b]\n: 1\n");
        assert_int_equal(p->r, -EINVAL);
        assert_diags(p, "t.yaml:1:3: error: mapping keys must be scalars, not a sequence (a "
                        "complex key)\n");
        parsed_free(p);
}

static void test_syntax_errors(void **state)
{
        static const struct {
                const char *text;
                size_t len;
                const char *expected;
        } cases[] = {
            {"a: \"abc\nb: 2\n", 0,
             "t.yaml:3:1: error: found unexpected end of stream (while scanning a quoted "
             "scalar)\n"
             "t.yaml:1:4: note: scanning a quoted scalar started here\n"},
            {"spec:\n\treplicas: 3\n", 0,
             "t.yaml:2:1: error: found character that cannot start any token (while "
             "scanning for the next token); YAML does not allow tabs for indentation\n"},
            {"a: 1\n b: 2\n", 0,
             "t.yaml:2:3: error: mapping values are not allowed in this context\n"},
            {"a: [1, 2\nb: 3\n", 0,
             "t.yaml:2:2: error: did not find expected ',' or ']' (while parsing a flow "
             "sequence)\n"
             "t.yaml:1:4: note: parsing a flow sequence started here\n"},
            {"a: b\nc: \xff\n", 0, "t.yaml:2:4: error: invalid leading UTF-8 octet (byte 0xFF)\n"},
            {"a: b\0c\n", 7,
             "t.yaml:1:5: error: control characters are not allowed (byte "
             "0x00)\n"},
            {"- a\nb: c\n", 0,
             "t.yaml:2:1: error: did not find expected '-' indicator (while parsing a block "
             "collection)\n"
             "t.yaml:1:1: note: parsing a block collection started here\n"},
            {"a: *nothing\n", 0,
             "t.yaml:1:4: error: alias \"*nothing\" refers to an undefined anchor\n"},
            {"a: &x [1, *x]\n", 0,
             "t.yaml:1:11: error: alias \"*x\" refers to a node that contains it (recursive "
             "alias)\n"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);
                parsed *p = parse_lim(cases[i].text, len, NULL);
                assert_int_equal(p->r, -EINVAL);
                assert_int_equal(p->docs.n, 0);
                assert_diags(p, cases[i].expected);
                parsed_free(p);
        }

        /* Documents before a syntax error are kept. */
        parsed *p = parse("a: 1\n---\nb: [\n");
        assert_int_equal(p->r, -EINVAL);
        assert_int_equal(p->docs.n, 1);
        parsed_free(p);
}

static void test_aliases_and_merge(void **state)
{
        assert_json("base: &b {x: 1, y: 2}\ncopy: *b\n",
                    "{\"base\":{\"x\":1,\"y\":2},\"copy\":{\"x\":1,\"y\":2}}");
        /* Explicit keys win; merged keys go where "<<" was. */
        assert_json("base: &b {x: 1, y: 2}\n"
                    "m:\n"
                    "  a: 0\n"
                    "  <<: *b\n"
                    "  y: 3\n",
                    "{\"base\":{\"x\":1,\"y\":2},\"m\":{\"a\":0,\"x\":1,\"y\":3}}");
        /* A sequence of mappings: earlier ones win. */
        assert_json("a: &a {x: 1}\nb: &b {x: 2, z: 2}\nm: {<<: [*a, *b]}\n",
                    "{\"a\":{\"x\":1},\"b\":{\"x\":2,\"z\":2},\"m\":{\"x\":1,\"z\":2}}");
        /* A quoted "<<" is an ordinary key. */
        assert_json("'<<': {x: 1}\n", "{\"<<\":{\"x\":1}}");

        parsed *p = parse("a: &a [1]\nm:\n  <<: *a\n");
        assert_int_equal(p->r, -EINVAL);
        assert_diags(p, "t.yaml:3:7: error: the value of a merge key \"<<\" must be a mapping or "
                        "a sequence of mappings, not a sequence\n");
        parsed_free(p);
        p = parse("a: &a {x: 1}\nm:\n  <<: *a\n  <<: *a\n");
        assert_int_equal(p->r, -EINVAL);
        assert_diags(p, "t.yaml:4:3: error: duplicate key \"<<\" (first defined at line 3)\n");
        parsed_free(p);

        /* The copy takes the alias position; its inside keeps the original one. */
        p = parse("a: &a\n  k: v\nb: *a\n");
        assert_int_equal(p->r, 0);
        ynode *b = ynode_get(p->docs.docs[0].root, "b");
        assert_int_equal(b->line, 3);
        assert_int_equal(b->col, 4);
        assert_int_equal(ynode_get(b, "k")->line, 2);
        parsed_free(p);

        /* Anchors are per document. */
        p = parse("a: &a 1\n---\nb: *a\n");
        assert_int_equal(p->r, -EINVAL);
        assert_int_equal(p->docs.n, 1);
        parsed_free(p);
}

static void test_core_schema(void **state)
{
        assert_json("[~, null, Null, NULL, '', \"null\", !!str null, !!null ~]",
                    "[null,null,null,null,\"\",\"null\",\"null\",null]");
        assert_json("a:\nb: ''\n", "{\"a\":null,\"b\":\"\"}");
        assert_json("[true, True, TRUE, false, False, FALSE, yes, no, on, tRue, 'true']",
                    "[true,true,true,false,false,false,\"yes\",\"no\",\"on\",\"tRue\",\"true\"]");
        assert_json("[0, 12, -3, +4, 0o17, 0x1F, 0xff, -0x10, 007, \"5\", !!str 6, 1_000]",
                    "[0,12,-3,4,15,31,255,-16,7,\"5\",\"6\",\"1_000\"]");
        assert_json("[9223372036854775807, -9223372036854775808, 99999999999999999999]",
                    "[9223372036854775807,-9223372036854775808,1e20]");
        assert_json("[1.5, -0.25, .5, 1., 1e3, 2.5E-2, !!float 3, 0x, 1e, .]",
                    "[1.5,-0.25,0.5,1.0,1000.0,0.025000000000000001,3.0,\"0x\",\"1e\",\".\"]");
        /* JSON has no infinity or NaN: the text is kept, the type name says number. */
        assert_json("[.inf, -.Inf, .NaN]", "[\".inf\",\"-.Inf\",\".NaN\"]");
        assert_json("a: |\n  line\nb: 3.5.16\nc: \"1.0\"\n1: x\n",
                    "{\"a\":\"line\\n\",\"b\":\"3.5.16\",\"c\":\"1.0\",\"1\":\"x\"}");
        assert_json("{z: 1, a: 2, m: 3}", "{\"z\":1,\"a\":2,\"m\":3}");

        parsed *p = parse("[~, '', 1, 1.5, .inf, true, x, \"1\", [], {}, !!int 7, !!bool yes]");
        assert_int_equal(p->r, 0);
        ynode *s = p->docs.docs[0].root;
        static const char *const names[] = {"null",     "string",  "integer", "number",
                                            "number",   "boolean", "string",  "string",
                                            "sequence", "mapping", "integer", "string"};
        for (size_t i = 0; i < s->n; i++)
                assert_string_equal(ynode_type_name(s->values[i]), names[i]);
        assert_true(ynode_is_null(s->values[0]));
        assert_false(ynode_is_null(s->values[1]));
        assert_false(ynode_is_null(s->values[8]));
        assert_false(ynode_is_null(NULL));
        assert_string_equal(ynode_type_name(NULL), "null");
        parsed_free(p);
}

static char *emit(const char *json, bool doc_start)
{
        json_error_t err;
        json_t *j = json_loads(json, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
        assert_non_null(j);
        strbuf sb = STRBUF_INIT;
        assert_int_equal(yaml_emit_json(j, doc_start, &sb), 0);
        json_decref(j);
        return sb_detach(&sb);
}

static void test_emit_exact(void **state)
{
        char *s = emit("{\"apiVersion\": \"gitcd.io/v1alpha1\", \"kind\": \"EtcdCluster\", "
                       "\"metadata\": {\"name\": \"main\", \"labels\": {}}, "
                       "\"spec\": {\"replicas\": 3, \"version\": \"3.5.16\", \"paused\": false, "
                       "\"ratio\": 1.0, \"note\": null, \"empty\": \"\", \"on\": \"true\", "
                       "\"port\": \"2379\", \"args\": [\"--a=1\", \" padded\"], "
                       "\"script\": \"echo 1\\necho 2\\n\"}}",
                       true);
        assert_string_equal(s, "---\n"
                               "apiVersion: gitcd.io/v1alpha1\n"
                               "kind: EtcdCluster\n"
                               "metadata:\n"
                               "  name: main\n"
                               "  labels: {}\n"
                               "spec:\n"
                               "  replicas: 3\n"
                               "  version: 3.5.16\n"
                               "  paused: false\n"
                               "  ratio: 1.0\n"
                               "  note: null\n"
                               "  empty: \"\"\n"
                               "  \"on\": \"true\"\n"
                               "  port: \"2379\"\n"
                               "  args:\n"
                               "  - --a=1\n"
                               "  - ' padded'\n"
                               "  script: |\n"
                               "    echo 1\n"
                               "    echo 2\n");
        free(s);
        s = emit("[1, 2]", false);
        assert_string_equal(s, "- 1\n- 2\n");
        free(s);
        s = emit("\"x\"", true);
        assert_string_equal(s, "--- x\n");
        free(s);

        /* Each call appends one document. */
        strbuf sb = STRBUF_INIT;
        json_t *a = json_pack("{s:i}", "a", 1);
        json_t *b = json_pack("{s:s}", "b", "yes");
        assert_int_equal(yaml_emit_json(a, true, &sb), 0);
        assert_int_equal(yaml_emit_json(b, true, &sb), 0);
        assert_string_equal(sb_str(&sb), "---\na: 1\n---\nb: \"yes\"\n");
        assert_int_equal(yaml_emit_json(NULL, true, &sb), -EINVAL);
        assert_string_equal(sb_str(&sb), "---\na: 1\n---\nb: \"yes\"\n");
        json_decref(a);
        json_decref(b);
        sb_release(&sb);
}

static void test_emit_round_trip(void **state)
{
        static const char *const values[] = {
            "{}",
            "[]",
            "null",
            "true",
            "0",
            "-9223372036854775808",
            "0.1",
            "1e300",
            "-2.5e-10",
            "3.0",
            "\"\"",
            "\" \"",
            "\"~\"",
            "\"null\"",
            "\"Null\"",
            "\"True\"",
            "\"false\"",
            "\"yes\"",
            "\"off\"",
            "\"12\"",
            "\"-3\"",
            "\"0o17\"",
            "\"0x1F\"",
            "\"1e3\"",
            "\".5\"",
            "\".inf\"",
            "\".NaN\"",
            "\"<<\"",
            "\"a: b\"",
            "\"- x\"",
            "\"#c\"",
            "\"&a\"",
            "\"*a\"",
            "\"!tag\"",
            "\"%x\"",
            "\"@x\"",
            "\"`x\"",
            "\"{x}\"",
            "\"[x]\"",
            "\"x, y\"",
            "\"? x\"",
            "\"|\"",
            "\">\"",
            "\"'q'\"",
            "\"\\\"d\\\"\"",
            "\"trailing \"",
            "\"\\nleading newline\"",
            "\"a\\nb\"",
            "\"a\\nb\\n\\n\"",
            "\"tab\\there\"",
            "\"nul\\u0000byte\"",
            "\"bell\\u0007\"",
            "\"h\\u00e9llo \\u2713\"",
            "\"\\ud83d\\ude00\"",
            "\"---\"",
            "\"...\"",
            "{\"\": 1, \"null\": 2, \"1\": 3, \"a b\": [1, {\"c\": []}], \"x\\ny\": true}",
            "[[[[1]]], {\"a\": {\"b\": {\"c\": [null, 1.5, \"s\"]}}}]",
            "{\"apiVersion\": \"v1\", \"kind\": \"Service\", \"spec\": {\"ports\": [{\"port\": "
            "2379, \"name\": \"client\"}], \"clusterIP\": \"None\"}}",
        };
        for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
                for (int doc_start = 0; doc_start < 2; doc_start++) {
                        json_error_t err;
                        json_t *j = json_loads(values[i], JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
                        assert_non_null(j);
                        strbuf sb = STRBUF_INIT;
                        assert_int_equal(yaml_emit_json(j, doc_start, &sb), 0);
                        assert_true(sb.len > 0 && sb.buf[sb.len - 1] == '\n');
                        parsed *p = parse_lim(sb.buf, sb.len, NULL);
                        assert_int_equal(p->r, 0);
                        assert_int_equal(p->docs.n, 1);
                        json_t *back = ynode_to_json(p->docs.docs[0].root);
                        if (!json_equal(j, back))
                                fprintf(stderr, "round trip of %s failed; emitted:\n%s", values[i],
                                        sb_str(&sb));
                        assert_true(json_equal(j, back));
                        json_decref(back);
                        json_decref(j);
                        parsed_free(p);
                        sb_release(&sb);
                }
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_positions),        cmocka_unit_test(test_multi_document),
            cmocka_unit_test(test_limit_file_bytes), cmocka_unit_test(test_limit_documents),
            cmocka_unit_test(test_limit_depth),      cmocka_unit_test(test_limit_nodes),
            cmocka_unit_test(test_billion_laughs),   cmocka_unit_test(test_duplicate_keys),
            cmocka_unit_test(test_syntax_errors),    cmocka_unit_test(test_aliases_and_merge),
            cmocka_unit_test(test_budget),           cmocka_unit_test(test_core_schema),
            cmocka_unit_test(test_emit_exact),       cmocka_unit_test(test_emit_round_trip),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
