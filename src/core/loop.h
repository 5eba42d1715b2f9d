/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The event loop of `run`: one thread, one epoll. Modules register the fds
 * they wait on (ring buffers, probe sockets, netlink) and timers; a callback
 * must never block, since everything else waits for it.
 */
#ifndef SP_LOOP_H
#define SP_LOOP_H

typedef void (*sp_loop_fn)(void *ctx);
struct sp_watch;

int sp_loop_init(void);
void sp_loop_fini(void);
/* Call fn(ctx) whenever fd is readable. The fd stays the caller's. */
struct sp_watch *sp_loop_watch(int fd, sp_loop_fn fn, void *ctx);
/* A timer (timerfd), disarmed until sp_timer_arm(). */
struct sp_watch *sp_loop_timer(sp_loop_fn fn, void *ctx);
/* First expiry after ms (0: at once), then every interval_ms (0: once). */
int sp_timer_arm(struct sp_watch *w, unsigned int ms, unsigned int interval_ms);
void sp_timer_disarm(struct sp_watch *w);
/* Stop watching; closes a timer's fd, never a watched fd. NULL is fine. */
void sp_loop_unwatch(struct sp_watch *w);
/* Dispatch until sp_loop_stop(); 0, or -1 when epoll itself fails. */
int sp_loop_run(void);
void sp_loop_stop(void);
/*
 * The largest lateness of a periodic timer's dispatch since the last call
 * (ns), then starts over: how long other callbacks kept the loop busy.
 */
unsigned long long sp_loop_delay_take(void);

#endif
