/* servesim — SIGINT and SIGTERM end a long command cleanly
 * (docs/servesim.1.md, "SIGNALS").
 *
 * The handler records the signal in a volatile sig_atomic_t and puts the
 * default action of SIGINT and SIGTERM back (SA_RESETHAND for its own,
 * sigaction for the other); the command reads the flag at its safe points
 * (the engine before each event, through engine_config.stop; calibrate run
 * before each point), writes what it has and exits 128 + the signal.  A
 * second signal, either, kills at once, also while the results are being
 * written (their temporary files may then remain, never a half-written
 * file under a final name).  No SA_RESTART: a blocking call (a live run's
 * wait for the next arrival) returns EINTR and its caller looks at the
 * flag.  A signal ignored when servesim started stays ignored.  Libraries
 * never install handlers.
 */
#include <signal.h>
#include <stdbool.h>
#include <string.h>

#include "cli.h"

volatile sig_atomic_t cli_interrupted;

/* which of SIGINT (0) and SIGTERM (1) have the handler; set before it is */
static bool caught[2];

static void on_signal(int sig)
{
	struct sigaction dfl;

	cli_interrupted = sig;
	/* SA_RESETHAND reset this one; the other goes back to its default
	 * too, so any second signal kills (sigaction is async-signal-safe) */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	if (caught[0])
		sigaction(SIGINT, &dfl, NULL);
	if (caught[1])
		sigaction(SIGTERM, &dfl, NULL);
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
	for (int k = 0; k < 2; k++) {
		int sig = k ? SIGTERM : SIGINT;
		struct sigaction old;

		/* a signal ignored when we started stays ignored (a shell's
		 * background job ignores SIGINT; nohup-like wrappers): the
		 * user asked for the run not to be stopped by it */
		if (sigaction(sig, NULL, &old) < 0)
			return -errno;
		if (old.sa_handler == SIG_IGN)
			continue;
		caught[k] = true;
		if (sigaction(sig, &sa, NULL) < 0)
			return -errno;
	}
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
