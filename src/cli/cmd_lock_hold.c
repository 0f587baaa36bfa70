/* cmd_lock_hold.c -- doctx lock hold NAME [options] -- COMMAND...: run a
 * command while holding a lock (dtx_lock_hold_*, docs/locks.md "Holding
 * a lock").
 *
 * The library keeps the lease alive and says when it is lost; this file
 * runs the command and ends it then:
 *   - the command runs in its own process group (so the whole group can
 *     be signalled: its children too; doctx is their subreaper, so the
 *     orphans of the group are its to reap), with DOCTX_LOCK_NAME, _TOKEN,
 *     _OWNER and _FENCE (NAME:TOKEN, what --fence takes) in its
 *     environment; SIGINT, SIGTERM and SIGHUP sent to doctx are passed to
 *     the group; should doctx itself die, the command gets SIGKILL
 *     (PR_SET_PDEATHSIG);
 *   - on a loss: SIGTERM to the group and to every descendant that left
 *     it (setsid), SIGKILL --grace-ms later to what is left of them, then
 *     exit DTX_EXIT_LOST (6) once all are gone;
 *   - otherwise, when the command ends, what it left running (its group,
 *     and what left the group) gets SIGTERM, SIGKILL --grace-ms later,
 *     while the lock is still held and renewed: the lock is released only
 *     once nothing the command started runs, so no leftover writes under
 *     a token the hold gave back.  The exit status is the command's
 *     (128 + N when signal N ended it).
 * Signals reach the main loop through a self-pipe (the loss too), so the
 * loop is one poll(); the library's keeper thread takes no signal. */
#include "cli/cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int wake[2] = {-1, -1}; /* the self-pipe: 'L' lost, else a signal */

static void note(unsigned char c) {
  int e = errno;
  ssize_t n = write(wake[1], &c, 1); /* full: a wake-up is pending anyway */
  (void)n;
  errno = e;
}

static void on_signal(int sig) { note((unsigned char)sig); }

static void on_lost(void *arg, int rc) {
  (void)arg;
  (void)rc;
  note('L');
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Every live process descended from doctx, found through /proc: the
 * command's group, and what left it (setsid, setpgid) -- doctx being
 * their subreaper, an orphan is its child again, so nothing the command
 * started can leave the tree.  Sends each one sig (0: none) and returns
 * how many there were.  Zombies are not counted: they are dead, and
 * doctx (or a live descendant) reaps them. */
typedef struct {
  pid_t pid, ppid;
  int mark; /* a descendant of doctx */
} proc_t;

static int proc_cmp(const void *a, const void *b) {
  pid_t x = ((const proc_t *)a)->pid, y = ((const proc_t *)b)->pid;
  return (x > y) - (x < y);
}

static int descendants(int sig) {
  DIR *d = opendir("/proc");
  proc_t *ps = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  int count = 0;
  if (!d)
    return 0;
  while ((de = readdir(d))) {
    char path[288], line[512];
    if (de->d_name[0] < '1' || de->d_name[0] > '9')
      continue;
    snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    size_t got = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[got] = '\0';
    /* "pid (comm) state ppid ...": comm may hold anything, so the last
     * ')' ends it. */
    char *rp = strrchr(line, ')'), state;
    long pp;
    if (!rp || sscanf(rp + 1, " %c %ld", &state, &pp) != 2 || state == 'Z')
      continue;
    if (n == cap) {
      proc_t *g = realloc(ps, (cap ? 2 * cap : 256) * sizeof *g);
      if (!g)
        break;
      ps = g;
      cap = cap ? 2 * cap : 256;
    }
    ps[n++] = (proc_t){(pid_t)atol(de->d_name), (pid_t)pp, 0};
  }
  closedir(d);
  if (n)
    qsort(ps, n, sizeof *ps, proc_cmp);
  /* Each pass marks the children of the marked: as many passes as the
   * tree is deep. */
  for (int more = 1; more;) {
    more = 0;
    for (size_t i = 0; i < n; i++) {
      proc_t key = {.pid = ps[i].ppid}, *up;
      if (ps[i].mark ||
          !(ps[i].ppid == getpid() ||
            ((up = bsearch(&key, ps, n, sizeof *ps, proc_cmp)) && up->mark)))
        continue;
      ps[i].mark = more = 1;
      count++;
      if (sig)
        kill(ps[i].pid, sig);
    }
  }
  free(ps);
  return count;
}

/* The command's environment: ours without any DOCTX_LOCK_*, plus the
 * lock's.  Built before the fork (the child only execs). */
static char **lock_env(const json_t *view, char *buf, size_t size) {
  extern char **environ;
  size_t n = 0, k = 0;
  while (environ[n])
    n++;
  char **env = calloc(n + 5, sizeof *env);
  if (!env)
    return NULL;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "DOCTX_LOCK_", 11) != 0)
      env[k++] = environ[i];
  const char *name = json_string_value(json_object_get(view, "name"));
  const char *owner = json_string_value(json_object_get(view, "owner"));
  long long token = json_integer_value(json_object_get(view, "token"));
  int off = 0;
  const char *fmt[4] = {"DOCTX_LOCK_NAME=%s", "DOCTX_LOCK_TOKEN=%lld",
                        "DOCTX_LOCK_OWNER=%s", "DOCTX_LOCK_FENCE=%s:%lld"};
  for (int i = 0; i < 4; i++) {
    env[k++] = buf + off;
    int w = i == 0   ? snprintf(buf + off, size - off, fmt[0], name)
            : i == 1 ? snprintf(buf + off, size - off, fmt[1], token)
            : i == 2 ? snprintf(buf + off, size - off, fmt[2],
                                owner ? owner : "")
                     : snprintf(buf + off, size - off, fmt[3], name, token);
    off += w + 1;
  }
  return env;
}

/* The child: its own group, SIGKILL when doctx dies, then the command. */
static void child(char **argv, char **env, pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) /* doctx died before the line above */
    _exit(137);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execvpe(argv[0], argv, env);
  int e = errno;
  const char *m = strerror(e);
  ssize_t n = write(2, "doctx: lock hold: ", 18);
  n = write(2, argv[0], strlen(argv[0]));
  n = write(2, ": ", 2);
  n = write(2, m, strlen(m));
  n = write(2, "\n", 1);
  (void)n;
  _exit(e == ENOENT ? 127 : 126);
}

int dtx__cli_lock_hold(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *name = a->pos[0];
  dtx_lock_opts_t lo = {.ttl_ms = dtx__cli_num(a, "--ttl-ms", 0),
                        .owner = dtx__cli_str(a, "--owner"),
                        .wait_ms = dtx__cli_num(a, "--wait-ms", 0),
                        .deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
  int64_t grace = dtx__cli_num(a, "--grace-ms", 5000);
  int code, rc;
  if ((rc = dtx_lock_check(name, &lo)))
    return dtx__cli_fail(rc);
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0)
    return dtx__cli_fail(DTX_ENOMEM);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  /* The handlers are in place before the command exists; the signals stay
   * blocked here until the fork, so none is lost in between. */
  const int sigs[4] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
  sigset_t block, was;
  sigemptyset(&block);
  struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 4; i++) {
    sigaddset(&block, sigs[i]);
    sigaction(sigs[i], &sa, NULL);
  }
  sigprocmask(SIG_BLOCK, &block, &was);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  dtx_lock_hold_t *h = NULL;
  if ((rc = dtx_lock_hold_start(st, name, &lo, on_lost, NULL, &h)))
    return dtx__cli_fail(rc);
  char buf[600];
  char **env = lock_env(dtx_lock_hold_view(h), buf, sizeof buf);
  pid_t parent = getpid(), pid = env ? fork() : -1;
  if (pid == 0)
    child(a->pos + 1, env, parent);
  if (pid > 0)
    setpgid(pid, pid); /* either of the two calls wins the race */
  sigprocmask(SIG_SETMASK, &was, NULL);
  free(env);
  if (pid < 0) {
    int e = errno;
    dtx_lock_hold_stop(h, NULL);
    fprintf(stderr, "doctx: BACKEND: lock hold: starting the command: %s\n",
            strerror(e));
    return DTX_EXIT_BACKEND;
  }
  int status = 0, reaped = 0, lost = 0, killed = 0, ending = 0;
  int64_t kill_at = INT64_MAX;
  for (;;) {
    /* Every child: the command, and what of its group was orphaned to
     * us (a subreaper), so that a dead group leaves no zombie behind
     * that kill(-pid, 0) would still count. */
    pid_t r;
    int st;
    while ((r = waitpid(-1, &st, WNOHANG)) > 0)
      if (r == pid) {
        status = st;
        reaped = 1;
      }
    int64_t now = mono_ms(), wait = -1;
    if (reaped && !lost && !ending) {
      if ((kill(-pid, 0) != 0 && errno == ESRCH) && descendants(0) == 0)
        break; /* the command ended and left nothing running */
      /* Leftovers: ended as a loss ends the command, under the lock. */
      ending = 1;
      kill(-pid, SIGTERM);
      descendants(SIGTERM);
      kill_at = grace > INT64_MAX - now ? INT64_MAX - 1 : now + grace;
    }
    if ((lost || ending) && now >= kill_at) {
      kill(-pid, SIGKILL);
      descendants(SIGKILL);
      killed = 1;
      kill_at = INT64_MAX; /* the leader's death wakes us (SIGCHLD) */
    } else if ((lost || ending) && reaped && kill(-pid, 0) != 0 &&
               errno == ESRCH && descendants(0) == 0) {
      break; /* the whole group is gone, and all that left it */
    }
    if ((lost || ending) && kill_at != INT64_MAX)
      wait = kill_at - now;
    if ((lost || ending) && reaped) /* what is left: look again soon */
      wait = wait < 0 || wait > 10 ? 10 : wait;
    struct pollfd p = {.fd = wake[0], .events = POLLIN};
    poll(&p, 1, wait < 0 ? -1 : wait > 60000 ? 60000 : (int)wait);
    unsigned char c;
    while (read(wake[0], &c, 1) == 1) {
      if (c == 'L' && !lost) {
        lost = 1;
        kill(-pid, SIGTERM);
        descendants(SIGTERM);
        /* Saturated: a grace too long for int64 is "never SIGKILL"; a
         * cleanup of leftovers already under way keeps its deadline. */
        if (!ending)
          kill_at = grace > INT64_MAX - mono_ms() ? INT64_MAX - 1
                                                  : mono_ms() + grace;
      } else if (c == SIGINT || c == SIGTERM || c == SIGHUP) {
        kill(-pid, c);
      }
    }
  }
  rc = dtx_lock_hold_stop(h, NULL);
  if (lost || rc == DTX_ESTALE) {
    dtx__cli_fail(rc ? rc : DTX_ESTALE);
    if (lost)
      fprintf(stderr, "doctx: lock hold: sent SIGTERM to the command's "
                      "process group%s\n",
              killed ? ", then SIGKILL" : "");
    return DTX_EXIT_LOST;
  }
  if (rc)
    dtx__cli_fail(rc); /* the release failed: the lease lapses by itself */
  if (ending)
    fprintf(stderr, "doctx: lock hold: the command left processes running: "
                    "sent them SIGTERM%s before the release\n",
            killed ? ", then SIGKILL" : "");
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}
