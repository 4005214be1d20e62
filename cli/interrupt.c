/* servesim — SIGINT and SIGTERM end a long command cleanly
 * (docs/servesim.1.md, "SIGNALS").
 *
 * The handler only records the signal in a volatile sig_atomic_t; the
 * command reads it at its safe points (the engine before each event,
 * through engine_config.stop; calibrate run between points), writes what
 * it has and exits 128 + the signal.  SA_RESETHAND puts the default action
 * back as the first signal is taken, so a second one kills at once, while
 * the results are being written (their temporary files may then remain:
 * never a half-written file under a final name).  No SA_RESTART: a
 * blocking call (a live run's wait for the next arrival) returns EINTR and
 * its caller looks at the flag.  Libraries never install handlers.
 */
#include <signal.h>
#include <string.h>

#include "cli.h"

volatile sig_atomic_t cli_interrupted;

static void on_signal(int sig)
{
	cli_interrupted = sig;
}

int cli_interrupt_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* either signal, while the handler runs, waits for it */
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	sa.sa_flags = SA_RESETHAND;
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0)
		return -errno;
	return 0;
}

const char *cli_interrupt_name(int sig)
{
	return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

int cli_interrupt_status(int sig)
{
	return 128 + sig;
}

void cli_interrupt_defer(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, old);
}

void cli_interrupt_resume(const sigset_t *old)
{
	sigprocmask(SIG_SETMASK, old, NULL);
}
