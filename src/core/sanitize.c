// SPDX-License-Identifier: GPL-2.0
/*
 * Sanitizer defaults of `make SANITIZE=1` builds, compiled in so that they
 * hold however the binary is started (ip netns exec, setpriv, nsenter): any
 * report aborts, so the exit status of every test shows it. ASAN_OPTIONS
 * and UBSAN_OPTIONS still override them.
 */
#ifdef SP_SANITIZE
const char *__asan_default_options(void);
const char *__ubsan_default_options(void);

const char *__asan_default_options(void)
{
	return "abort_on_error=1:halt_on_error=1:detect_leaks=1:disable_coredump=1";
}

const char *__ubsan_default_options(void)
{
	return "abort_on_error=1:halt_on_error=1:print_stacktrace=1";
}
#endif
