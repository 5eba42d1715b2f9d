/* SPDX-License-Identifier: GPL-2.0 */
/* A run of the service: attaching its modules, the event loop, its targets. */
#ifndef SP_RUN_H
#define SP_RUN_H

#include <signal.h>
#include "core/sp.h"

/* run.c: what attaches a run's modules and takes them down again, for `run` and service.c. */
int sp_run_attach(struct sp_run *run);	/* 0, or -1 with nothing left attached */
void sp_run_detach(struct sp_run *run);
int sp_lock_pin_dir(const char *pin_dir);	/* the folder's flock fd, or -1 */
void sp_sweep_pins(const char *pin_dir);	/* a killed run's pins, once we hold the lock */
/* The runs whose modules tick (every 100 ms) while the loop runs. */
void sp_runs_add(struct sp_run *run);
void sp_runs_del(struct sp_run *run);
/* Called on SIGHUP instead of ending the run, when set (a config run re-reads its file). */
extern void (*sp_reload_hook)(void);
/*
 * The event loop until a signal ends it; 0, or 1. Every interval seconds
 * (0: never) show(pin_dir): what --interval shows is the caller's.
 */
typedef void sp_show_fn(char *pin_dir);
int sp_run_loop(char *pin_dir, __u32 interval, sp_show_fn *show);


/* run.c: set by SIGINT/SIGTERM/SIGHUP. */
extern volatile sig_atomic_t sp_stopping;

/* SIGINT/SIGTERM/SIGHUP are blocked from the start of `run` and read from a signalfd. */
void sp_run_block_signals(void);


#endif
