/* exec.c -- the built-in handler behind `doctx job work --exec CMD`: runs
 * CMD with /bin/sh -c in its own process group, the job's JSON on its
 * stdin and DOCTX_JOB_ID, DOCTX_JOB_EPOCH and DOCTX_STORE in its
 * environment.  Exit 0 succeeds (stdout, when it is JSON, is the result);
 * anything else fails, with the end of stderr as the error.  While CMD
 * runs, the worker's heartbeat keeps the lease; when the attempt stops
 * being alive (lease lost, or --timeout-ms passed) the whole group is
 * killed, so a hung CMD and its children cannot outlive the attempt; a
 * canceled one (cancel.c) gets SIGTERM first and SIGKILL after
 * CANCEL_GRACE_MS.
 * The attempt ends when CMD exits -- not when its output pipes close,
 * which a child left in the background may hold open -- and whatever is
 * left of its process group is then killed.
 *
 * The environment is built before fork: between fork and exec the child
 * of a threaded process may only make async-signal-safe calls. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "doc/doc.h"
#include "store/store.h" /* dtx__store_uri_secret */
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/err.h"

extern char **environ;

#define OUT_MAX (1 << 20) /* stdout kept for the result */
#define ERR_KEEP 2048     /* the end of stderr kept as last_error */
#define DRAIN_MS 1000     /* reading the pipes after CMD exited */
#define GROUP_WAIT_MS 100 /* then waiting for its killed group to go */
/* A canceled attempt's group gets SIGTERM, then SIGKILL this much later
 * (docs/jobs.md, "Canceling a running job"): time to clean up, as lock
 * hold's --grace-ms gives its command (its default too). */
#define CANCEL_GRACE_MS 2000

typedef struct buf {
  char *p;
  size_t n, cap;
} buf_t;

static void buf_add(buf_t *b, const char *s, size_t n, size_t max, int tail) {
  if (tail && b->n + n > max) { /* keep the last max bytes */
    if (n >= max) {
      s += n - max;
      n = max;
      b->n = 0;
    } else {
      size_t drop = b->n + n - max;
      memmove(b->p, b->p + drop, b->n - drop);
      b->n -= drop;
    }
  }
  if (!tail && b->n + n > max)
    n = b->n < max ? max - b->n : 0;
  if (b->n + n + 1 > b->cap) {
    size_t cap = (b->n + n + 1) * 2;
    char *p = realloc(b->p, cap);
    if (!p)
      return;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
  DTX_ASSERT(b->n <= max, "job.exec.kept"); /* what OUT_MAX, ERR_KEEP say */
}

/* environ plus our three variables (replacing any old ones). */
static char **make_env(const dtx_job_run_t *run, char *vars[3]) {
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = calloc(n + 4, sizeof *env);
  if (!env)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "DOCTX_JOB_ID=", 13) &&
        strncmp(environ[i], "DOCTX_JOB_EPOCH=", 16) &&
        strncmp(environ[i], "DOCTX_STORE=", 12))
      env[k++] = environ[i];
  const char *uri = dtx__store_uri_secret(run->ex->st); /* it must open it */
  if (asprintf(&vars[0], "DOCTX_JOB_ID=%s", run->id) < 0)
    vars[0] = NULL;
  if (asprintf(&vars[1], "DOCTX_JOB_EPOCH=%lld", (long long)run->epoch) < 0)
    vars[1] = NULL;
  if (asprintf(&vars[2], "DOCTX_STORE=%s", uri ? uri : "") < 0)
    vars[2] = NULL;
  for (int i = 0; i < 3; i++)
    if (vars[i])
      env[k++] = vars[i];
  return env;
}

int dtx_job_exec(dtx_job_run_t *run, const json_t *job, void *cmd) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  char *vars[3] = {0};
  char **env = make_env(run, vars);
  char *text = json_dumps(job, JSON_COMPACT);
  buf_t ob = {0}, eb = {0};
  int rc = -1;
  pid_t pid = -1;
  if (!env || !text || pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) ||
      pipe2(err, O_CLOEXEC)) {
    dtx_job_fail(run, "cannot start the command: out of resources");
    goto done;
  }
  pid = fork();
  if (pid < 0) {
    dtx_job_fail(run, "cannot fork the command");
    goto done;
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(in[0]), close(in[1]), close(out[0]), close(out[1]);
    close(err[0]), close(err[1]);
    char *argv[] = {"sh", "-c", (char *)cmd, NULL};
    execve("/bin/sh", argv, env);
    _exit(127);
  }
  setpgid(pid, pid); /* also here: no window where a kill misses it */
  close(in[0]), close(out[1]), close(err[1]);
  in[0] = out[1] = err[1] = -1;
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  size_t len = strlen(text), sent = 0;
  int killed = 0, exited = 0, status = -1, open_out = 1, open_err = 1;
  int64_t drain_until = 0, term_until = 0; /* a cancel's SIGTERM grace */
  dtx__wait_t child = {.pause = 5}; /* polls an exiting child at 5 ms */
  if (len == 0) {
    close(in[1]);
    in[1] = -1;
  }
  /* The attempt ends when CMD exits, not when its pipes close: a child it
   * left in the background may hold them open for as long as it likes
   * (`sleep 20 & echo ok`).  Until the exit, read its output (so it never
   * blocks on a full pipe) and kill its group when the attempt stops being
   * alive; after the exit, kill what is left of its group and read what
   * the pipes still hold, for at most DRAIN_MS. */
  while (!exited || ((open_out || open_err) && dtx__mono_ms() < drain_until)) {
    if (!exited) {
      /* WNOWAIT: the leader stays a zombie, so its pid -- the group's id
       * -- cannot be reused before the group is killed below. */
      siginfo_t si = {0};
      int w = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
      if ((w == 0 && si.si_pid == pid) || (w < 0 && errno != EINTR)) {
        exited = 1;
        kill(-pid, SIGKILL); /* the leftovers of its group */
        drain_until = dtx__mono_ms() + DRAIN_MS;
        if (in[1] >= 0) {
          close(in[1]);
          in[1] = -1;
        }
      } else if (!killed && term_until && dtx__mono_ms() >= term_until) {
        kill(-pid, SIGKILL); /* the cancel's grace is over */
        killed = 1;
      } else if (!killed && !term_until && !dtx_job_alive(run)) {
        if (atomic_load(&run->canceled) && !atomic_load(&run->lost) &&
            dtx__mono_ms() < run->deadline) {
          kill(-pid, SIGTERM); /* canceled: time to clean up first */
          term_until = dtx__mono_ms() + CANCEL_GRACE_MS;
        } else {
          kill(-pid, SIGKILL);
          killed = 1;
        }
      }
    }
    struct pollfd p[3];
    int np = 0;
    if (open_out)
      p[np++] = (struct pollfd){.fd = out[0], .events = POLLIN};
    if (open_err)
      p[np++] = (struct pollfd){.fd = err[0], .events = POLLIN};
    if (in[1] >= 0)
      p[np++] = (struct pollfd){.fd = in[1], .events = POLLOUT};
    if (np == 0) {
      if (!exited)
        dtx__kit_wait(&child, 0);
      continue;
    }
    if (poll(p, (nfds_t)np, exited ? 10 : 50) < 0 && errno != EINTR)
      break;
    for (int i = 0; i < np; i++) {
      if (!p[i].revents)
        continue;
      if (p[i].fd == in[1]) {
        ssize_t w = write(in[1], text + sent, len - sent);
        if (w > 0)
          sent += (size_t)w;
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || sent == len) {
          close(in[1]); /* EOF, or CMD does not read its stdin */
          in[1] = -1;
        }
        continue;
      }
      char chunk[4096];
      ssize_t r = read(p[i].fd, chunk, sizeof chunk);
      if (r > 0) {
        if (p[i].fd == out[0])
          buf_add(&ob, chunk, (size_t)r, OUT_MAX, 0);
        else
          buf_add(&eb, chunk, (size_t)r, ERR_KEEP, 1);
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (p[i].fd == out[0])
          open_out = 0;
        else
          open_err = 0;
      }
    }
  }
  /* Reap the leader (its status is the attempt's), then wait, bounded,
   * for the group it leaves to be gone: the leftovers were killed
   * (SIGKILL cannot be caught), their pipes are closed, and whoever
   * inherited them -- init, or a subreaper -- reaps them, which some
   * inits do only every second or two: so a short bound. */
  for (;;) {
    pid_t w = waitpid(pid, &status, 0);
    if (w == pid || (w < 0 && errno != EINTR))
      break;
  }
  for (int64_t until = dtx__mono_ms() + GROUP_WAIT_MS;
       kill(-pid, 0) == 0 && dtx__mono_ms() < until;)
    dtx__kit_wait(&child, 0);
  if (term_until) {
    dtx_job_fail(run, "stopped: the job was canceled");
  } else if (killed) {
    dtx_job_fail(run, dtx__mono_ms() >= run->deadline
                          ? "killed: the command ran past --timeout-ms"
                          : "killed: the attempt lost its lease");
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    rc = 0;
    json_t *res = ob.n ? json_loadb(ob.p, ob.n, 0, NULL) : NULL;
    if (res)
      dtx_job_result(run, res);
    json_decref(res);
  } else {
    char msg[ERR_KEEP + 64];
    size_t n = eb.n;
    while (n && (eb.p[n - 1] == '\n' || eb.p[n - 1] == '\r'))
      n--;
    if (n)
      snprintf(msg, sizeof msg, "%.*s", (int)n, eb.p);
    else if (WIFEXITED(status))
      snprintf(msg, sizeof msg, "exit status %d", WEXITSTATUS(status));
    else
      snprintf(msg, sizeof msg, "killed by signal %d",
               WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    dtx_job_fail(run, msg);
  }
done:
  for (int i = 0; i < 2; i++) {
    if (in[i] >= 0)
      close(in[i]);
    if (out[i] >= 0)
      close(out[i]);
    if (err[i] >= 0)
      close(err[i]);
  }
  free(text);
  free(env);
  for (int i = 0; i < 3; i++)
    free(vars[i]);
  free(ob.p);
  free(eb.p);
  return rc;
}
