/* Worker processes sharing roved's listeners (workers.h). */
#include <sys/prctl.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "workers.h"

struct workers {
	unsigned n;
	pid_t *pid;             /* worker 0: the others' (0: exited) */
	struct event *chld;
	bool failed, stopping;
	void (*died)(void *);
	void *arg;
};

int
workers_start(struct event_base *base, const struct cfg *cfg,
    const struct cid_server_id *layout, struct udp_socket *est,
    struct udp_socket *hs, struct workers **out, char **cause)
{
	struct udp_socket (*ge)[CID_WORKERS_MAX], (*gh)[CID_WORKERS_MAX];
	struct workers *ws = xcalloc(1, sizeof *ws);
	unsigned n = cfg->workers, me = 0;
	pid_t parent = getpid();
	size_t i, opened = 0;

	ws->n = n;
	ws->pid = xcalloc(n, sizeof *ws->pid);
	ge = xcalloc(cfg->nlisten + 1, sizeof *ge);
	gh = xcalloc(cfg->nlisten + 1, sizeof *gh);
	for (i = 0; i < cfg->nlisten; i++, opened++) {
		const struct sockaddr *sa = (const struct sockaddr *)&cfg->listen[i];

		if (udp_open_workers(ge[i], gh[i], n, sa->sa_family, sa,
		    cfg->listen_len[i], cid_first_octet(layout),
		    cid_worker_offset(layout), cause) != 0)
			goto fail;
	}
	/* Children must not answer to the service manager. */
	for (unsigned w = 1; w < n; w++) {
		pid_t pid = fork();

		if (pid == -1) {
			xasprintf(cause, "fork: %s", strerror(errno));
			goto fail;
		}
		if (pid == 0) {
			me = w;
			free(ws->pid);
			ws->pid = NULL;
			(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
			/* Worker 0 may have died before the line above. */
			if (getppid() != parent)
				_exit(1);
			unsetenv("NOTIFY_SOCKET");
			if (event_reinit(base) != 0)
				fatalx("event_reinit failed");
			break;
		}
		ws->pid[w] = pid;
	}
	for (i = 0; i < cfg->nlisten; i++) {
		for (unsigned w = 0; w < n; w++) {
			if (w == me) {
				est[i] = ge[i][w];
				hs[i] = gh[i][w];
				continue;
			}
			udp_close(&ge[i][w]);
			udp_close(&gh[i][w]);
		}
	}
	free(ge);
	free(gh);
	*out = ws;
	return (int)me;
fail:
	for (size_t k = 0; k < opened; k++) {
		for (unsigned w = 0; w < n; w++) {
			udp_close(&ge[k][w]);
			udp_close(&gh[k][w]);
		}
	}
	free(ge);
	free(gh);
	workers_free(ws);
	return -1;
}

static void
chld_cb(evutil_socket_t sig, short what, void *arg)
{
	struct workers *ws = arg;
	bool died = false;
	pid_t pid;
	int st;

	(void)sig;
	(void)what;
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (unsigned w = 1; w < ws->n; w++) {
			if (ws->pid[w] != pid)
				continue;
			ws->pid[w] = 0;
			if (ws->stopping)
				break;
			if (WIFSIGNALED(st))
				log_error("worker %u (pid %d) died of signal %d", w,
				    (int)pid, WTERMSIG(st));
			else
				log_error("worker %u (pid %d) exited with status %d",
				    w, (int)pid, WEXITSTATUS(st));
			died = true;
		}
	}
	if (died && !ws->failed) {
		ws->failed = true;
		if (ws->died != NULL)
			ws->died(ws->arg);
	}
}

void
workers_watch(struct workers *ws, struct event_base *base,
    void (*died)(void *), void *arg)
{
	if (ws == NULL || ws->pid == NULL)
		return;
	ws->died = died;
	ws->arg = arg;
	ws->chld = evsignal_new(base, SIGCHLD, chld_cb, ws);
	if (ws->chld == NULL || event_add(ws->chld, NULL) != 0)
		fatalx("cannot watch the workers (SIGCHLD)");
}

void
workers_signal(struct workers *ws, int sig)
{
	if (ws == NULL || ws->pid == NULL)
		return;
	if (sig == SIGTERM)
		ws->stopping = true;
	for (unsigned w = 1; w < ws->n; w++) {
		if (ws->pid[w] > 0)
			kill(ws->pid[w], sig);
	}
}

bool
workers_failed(const struct workers *ws)
{
	return ws != NULL && ws->failed;
}

void
workers_free(struct workers *ws)
{
	if (ws == NULL)
		return;
	if (ws->pid != NULL) {
		workers_signal(ws, SIGTERM);
		for (unsigned w = 1; w < ws->n; w++) {
			int st;

			if (ws->pid[w] <= 0)
				continue;
			/* 5 s to close their connections, then no more.
			 * Polled finely: a restart waits for this exit. */
			for (int t = 0; t < 2500; t++) {
				if (waitpid(ws->pid[w], &st, WNOHANG) != 0)
					break;
				usleep(2000);
			}
			if (waitpid(ws->pid[w], &st, WNOHANG) == 0) {
				kill(ws->pid[w], SIGKILL);
				waitpid(ws->pid[w], &st, 0);
			}
		}
	}
	if (ws->chld != NULL)
		event_free(ws->chld);
	free(ws->pid);
	free(ws);
}

char *
workers_name(const char *name, const char *sep, unsigned w, size_t max)
{
	char *s;

	if (w == 0)
		s = xstrdup(name);
	else
		xasprintf(&s, "%s%s%u", name, sep, w);
	if (strlen(s) > max) {
		free(s);
		return NULL;
	}
	return s;
}
