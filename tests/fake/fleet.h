/*
 * A fleet of fake worlds (tests/fake/fake.h): one world per cluster behind
 * one target and one etcd operation table, so the driver can run many
 * simulated clusters at once, from several threads. A world is made the
 * first time the target sees its cluster. Cluster names must be unique
 * across namespaces (the fake's member URLs carry only the member name).
 *
 * The clock every world and the reconcilers read is the monotonic clock
 * plus an offset a test may advance (fake_fleet_advance), so a test can
 * skip etcd's health interval and a bench can leave it real.
 *
 * Hangs: fake_fleet_hang() makes every etcd call of a cluster block (as a
 * SIGSTOPped member does until the client's deadline) until released;
 * fake_fleet_hang_target() makes its target operations block the way a
 * real target's slow wait does (a stop waiting for an exit, a Pod deletion
 * waiting on its grace period): outside the shared lock of
 * targets/locked.h (target_blocking_begin/end).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/fake/fake.h"

typedef struct fake_fleet fake_fleet;

/* A fleet and its target (not locked: wrap it with target_locked_new for threads). */
int fake_fleet_new(fake_fleet **ret, target **ret_target);
/* Frees the worlds; the target must be freed before. */
void fake_fleet_free(fake_fleet *f);

/* The etcd operations; etcd_userdata is the fleet. */
extern const etcd_membership_ops fake_fleet_etcd_ops;

/* The fleet's clock (reconciler and driver clocks), and moving it forward. */
int64_t fake_fleet_clock_ms(void);
void fake_fleet_advance(int64_t ms);

/* The world of a cluster (by name), NULL before the target first saw it. */
fake_world *fake_fleet_world(fake_fleet *f, const char *cluster);
/* Block (true) or release (false) every etcd call of a cluster. */
void fake_fleet_hang(fake_fleet *f, const char *cluster, bool hang);
/* Whether an etcd call of the cluster is blocked by a hang right now. */
bool fake_fleet_hung(fake_fleet *f, const char *cluster);
/* Block (true) or release (false) every target operation of a cluster. */
void fake_fleet_hang_target(fake_fleet *f, const char *cluster, bool hang);
/* Whether a target operation of the cluster is blocked by a hang right now. */
bool fake_fleet_target_hung(fake_fleet *f, const char *cluster);
/* How many worlds, and how many bytes of them are resident (mincore). */
size_t fake_fleet_worlds(fake_fleet *f, size_t *ret_resident_bytes);
