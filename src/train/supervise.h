/* `bertc train --supervise N`: a parent process that restarts the trainer.
 *
 * supervise_run re-executes this binary (/proc/self/exe) as a child with the
 * subcommand's arguments minus --supervise, waits for it, and after an
 * abnormal end (killed by a signal: the OOM killer, a crash; exit 1: a CUDA
 * or other run-time error; any exit code other than 0, 2 and 75) starts it
 * again, up to max_restarts times, each restart with `--resume auto` in
 * place of any --resume (the first attempt keeps the user's, so --resume
 * never still starts over once), after a back-off of base * 2^(k-1) seconds
 * for restart k, capped at 60 s. The base is 1 s, or BERTC_SUPERVISE_BACKOFF_S
 * (seconds, 0..60: tests use small values).
 *
 * A failure that repeats is not restarted either: when an attempt exits with
 * a code (not a signal) and prints the same error line as the attempt before
 * it, with the same exit code and the same newest checkpoint (no progress in
 * between), a restart would fail the same way again (bad data, a bug, a
 * divergence: the trainer's errors name the step), so the supervisor stops
 * with that error (action "repeated") instead of spending the restarts left.
 * The child passes its error line back through a pipe whose descriptor is in
 * BERTC_SUPERVISE_ERROR_FD (supervise_note_error, called by main). Deaths by
 * a signal (kill -9, the OOM killer, a crash) are always restarted as above.
 *
 * Never restarted: exit 0 (done), exit 2 (bad usage or input: the same
 * arguments would fail the same way), exit 75 (stopped on purpose), and any
 * end after the supervisor itself got SIGINT, SIGTERM or SIGHUP.
 *
 * Signals: the child runs in its own process group, so a Ctrl-C at the
 * terminal reaches only the supervisor, which forwards each SIGINT and
 * SIGTERM to the child (SIGHUP is forwarded as SIGTERM): the trainer gets
 * exactly one, finishes its step, saves and exits 75 (a second Ctrl-C kills
 * it at once, as without --supervise). Ctrl-Z (SIGTSTP) stops the child
 * and the supervisor, and fg/bg continue both. A signal during a back-off wait ends
 * the supervisor with 75 without starting the child again. If the supervisor
 * dies (even by SIGKILL) the child gets SIGTERM (PR_SET_PDEATHSIG), so it
 * saves and stops rather than running on unsupervised.
 *
 * The child's environment has BERTC_SUPERVISE_ATTEMPT=k (1 for the first).
 *
 * Log: when an attempt is restarted, one line goes to stderr and one row to
 * RUN/restarts.csv (SUPERVISE_LOG; the directory is created if the child had
 * not yet made it); once there has been a restart the final attempt's end is
 * logged as well, so the file tells the whole story. A run that needed no
 * restart, or whose only attempt failed with exit 2, writes no file. Columns
 * (SUPERVISE_HEADER):
 *   time             UTC end of the attempt, 2024-05-01T12:34:56Z
 *   attempt          1-based number of the attempt that ended
 *   pid              its process id
 *   exit_code        its exit status as a shell reports it (128+N when
 *                    killed by signal N)
 *   signal           SIGKILL, SIGSEGV, ... or empty when it exited
 *   runtime_s        how long it ran
 *   checkpoint_step  step of the newest checkpoint dir after it ended
 *                    (listed, not verified), -1 when there is none
 *   action           restart | done | stopped | not-restartable | gave-up |
 *                    repeated
 *   backoff_s        the wait before the restart (0 otherwise)
 *
 * Return: the final child's exit status (0, 1, 2, 75, or 128+N after a
 * signal); with an error message set (err.h) only when the supervisor adds
 * something to what the child printed (it gave up, or could not start it).
 * 75 too when stopped during a back-off. */
#ifndef BERTC_SUPERVISE_H
#define BERTC_SUPERVISE_H

#define SUPERVISE_LOG "restarts.csv"
#define SUPERVISE_HEADER "time,attempt,pid,exit_code,signal,runtime_s,checkpoint_step,action,backoff_s"
#define SUPERVISE_BACKOFF_MAX_S 60.0
#define SUPERVISE_MAX_RESTARTS 1000

/* argv[0] is the subcommand ("train"); run_dir may be NULL (no log). */
int supervise_run(int max_restarts, int argc, char **argv, const char *run_dir);

/* In the child (called by main with the line it prints on stderr, without
 * "bertc: "): when BERTC_SUPERVISE_ERROR_FD names a descriptor, writes the
 * line there (at most 1 KiB, never blocks). Does nothing otherwise. */
void supervise_note_error(const char *msg);

/* The parts, for tests. */

/* Whether two failed attempts failed the same way: both exited with the same
 * code (no signal), the same non-empty error line and the same newest
 * checkpoint step. */
int supervise_same_failure(int status_a, const char *msg_a, long long ckpt_a, int status_b, const char *msg_b,
                           long long ckpt_b);

/* The child's argv (NULL-terminated, *argc_out entries): prog, then argv
 * without --supervise N / --supervise=N and, when restart != 0, without any
 * --resume X / --resume=X and with "--resume auto" appended (before a "--"
 * that ends the options, if there is one). Free with free() (the strings
 * are argv's or literals). */
char **supervise_child_argv(const char *prog, int argc, char **argv, int restart, int *argc_out);
/* Whether a waitpid() status is worth a restart. */
int supervise_restartable(int status);
/* The shell's view of a waitpid() status: the exit code, or 128+N. */
int supervise_exit_code(int status);
/* Seconds before restart k (1-based): min(base * 2^(k-1), 60). */
double supervise_backoff(double base, int k);

#endif
