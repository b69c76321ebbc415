/*
 * What this process knows about which etcd endpoints are not serving, shared
 * by all of its etcd clients (etcd/client.c): a member whose gRPC health said
 * NOT_SERVING, found by one client, is tried last by every other one too,
 * and a member this process is defragmenting (etcd_defragment) is held not
 * serving for as long as its Defragment call runs, so that its other
 * clients' writes go elsewhere before they are sent rather than wait for the
 * defragmentation. The calls the process has in flight on each endpoint are
 * counted, so that a defragmentation can let those already sent finish
 * first (etcd_mark_drain).
 *
 * One entry per endpoint URL as a client normalizes it
 * ("http://127.0.0.1:2379"), held by every client configured with it
 * (etcd_marks_ref / etcd_marks_unref). Thread-safe: the lookup takes a lock
 * (when a client is made and freed), the marks and counts are atomics read
 * on every call without one.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct etcd_mark etcd_mark;

/* The entry of url, made on first use; never NULL. */
etcd_mark *etcd_marks_ref(const char *url);
/* Drop one reference; the last frees the entry. NULL is a no-op. */
void etcd_marks_unref(etcd_mark *m);

/*
 * The time (monotonic ms) until which the endpoint counts as not serving,
 * for etcd/select.h: 0 when it was never marked or was cleared, a time in
 * the past when a mark ran out (asked again before a call is sent there),
 * INT64_MAX while a defragmentation by this process holds it.
 */
int64_t etcd_mark_until(const etcd_mark *m);
/* The same by URL, 0 for a URL no client of the process holds (for tests). */
int64_t etcd_marks_until(const char *url);

/* It said NOT_SERVING: not serving until until_ms (the later mark wins). */
void etcd_mark_down(etcd_mark *m, int64_t until_ms);
/* It answered as serving: its health mark is cleared (a hold stays). */
void etcd_mark_up(etcd_mark *m);

/*
 * This process sends the endpoint a Defragment (hold) and has its answer
 * (release): held, it is not serving whatever its health says. Holds nest
 * (two defragmentations of one member at once). The last release with
 * served true clears the health mark; with false (no answer, or an error:
 * the member may still be defragmenting) it leaves a mark that has run out,
 * so the member is asked before a call is sent there again.
 */
void etcd_mark_hold(etcd_mark *m);
void etcd_mark_release(etcd_mark *m, bool served);

/* A call of this process on the endpoint begins / ends (they nest). */
void etcd_mark_enter(etcd_mark *m);
void etcd_mark_leave(etcd_mark *m);
/*
 * A call begins unless a defragmentation holds the endpoint: false then,
 * and nothing is counted. The call is counted before the hold is looked at,
 * and etcd_mark_hold comes before etcd_mark_drain looks at the count (all
 * sequentially consistent), so either the call sees the hold or the drain
 * sees the call: no call slips past a drain.
 */
bool etcd_mark_enter_unless_held(etcd_mark *m);

/*
 * Wait, until deadline (monotonic ms), for the process's calls in flight on
 * the endpoint to end. True when they did; false at the deadline (a long
 * call, a snapshot: the caller goes on). Called after etcd_mark_hold, it
 * lets the calls sent before the hold finish (with
 * etcd_mark_enter_unless_held, also one whose endpoint was chosen just
 * before the hold).
 */
bool etcd_mark_drain(const etcd_mark *m, int64_t deadline);
