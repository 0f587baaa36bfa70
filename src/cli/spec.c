/* spec.c -- the one parser of doctx command lines, and the --help texts,
 * both read from the commands' specs (cli.h).
 *
 * A command line is: the command, its subcommand (the first positional;
 * a command's form without one, such as transfer FROM TO AMOUNT, when the
 * positionals fit it), then options and positionals in any order.  An
 * option is --NAME, --NAME VALUE or --NAME=VALUE; everything after `--`
 * is a positional, so a value that starts with "--" can be given.  Every
 * error is a usage error naming the command, found before the command's
 * function runs. */
#include "cli/cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define EACH_OPT(s, o)                                                       \
  for (const dtx__cli_opt_t *o = (s)->opts; o && o->name; o++)
#define EACH_SUB(s, c)                                                       \
  for (const dtx__cli_spec_t *c = (s)->subs; c && c->name; c++)

static int is_help(const char *a) {
  return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* The option arg names (up to '='), in s or, with deep, any subcommand. */
static const dtx__cli_opt_t *find_opt(const dtx__cli_spec_t *s,
                                      const char *arg, int deep) {
  size_t len = strcspn(arg, "=");
  EACH_OPT(s, o) if (strlen(o->name) == len && !strncmp(o->name, arg, len))
    return o;
  if (deep)
    EACH_SUB(s, c) {
      const dtx__cli_opt_t *o = find_opt(c, arg, 1);
      if (o)
        return o;
    }
  return NULL;
}

static int is_opt(const char *a) { return a[0] == '-' && a[1] == '-' && a[2]; }

int dtx__cli_opt_index(const dtx__cli_spec_t *s, const char *name) {
  for (int i = 0; s->opts && s->opts[i].name; i++)
    if (strcmp(s->opts[i].name, name) == 0)
      return i;
  return -1;
}

static int opt_index(const dtx__cli_args_t *a, const char *name) {
  int k = dtx__cli_opt_index(a->spec, name);
  if (k < 0) {
    fprintf(stderr, "doctx: %s: no option %s in its spec\n", a->cmd, name);
    abort();
  }
  return k;
}

const char *dtx__cli_str(const dtx__cli_args_t *a, const char *name) {
  return a->val[opt_index(a, name)];
}

int dtx__cli_has(const dtx__cli_args_t *a, const char *name) {
  return dtx__cli_str(a, name) != NULL;
}

int64_t dtx__cli_num(const dtx__cli_args_t *a, const char *name,
                     int64_t dflt) {
  int k = opt_index(a, name);
  return a->val[k] ? a->num[k] : dflt;
}

int dtx__cli_int(const dtx__cli_args_t *a, const char *name, int dflt) {
  int k = opt_index(a, name);
  if (!a->spec->opts[k].c_int) {
    fprintf(stderr, "doctx: %s: option %s is not marked c_int in its spec\n",
            a->cmd, name);
    abort();
  }
  return a->val[k] ? (int)a->num[k] : dflt; /* parse_opt kept it in range */
}

dtx_page_t dtx__cli_page(const dtx__cli_args_t *a) {
  return (dtx_page_t){.skip = dtx__cli_num(a, "--skip", 0),
                      .limit = dtx__cli_num(a, "--limit", 0),
                      .after = dtx__cli_str(a, "--after")};
}

/* ---- positionals: "COLL [FILTER]", "TRADE_ID..." --------------------- */

/* The number of names in args, how many are required and whether the
 * last repeats; name i without its brackets and dots into buf (the last
 * one's when i is past it). */
static int pos_names(const char *args, int *min, int *more, int i,
                     char *buf, size_t size) {
  int n = 0;
  *min = *more = 0;
  for (const char *p = args ? args : ""; *(p += strspn(p, " ")); n++) {
    size_t len = strcspn(p, " "), opt = *p == '[', end = len - opt;
    *more = end - opt > 3 && !strncmp(p + end - 3, "...", 3);
    *min += !opt;
    if (n <= i && buf)
      snprintf(buf, size, "%.*s", (int)(end - opt - (*more ? 3 : 0)),
               p + opt);
    p += len;
  }
  return n;
}

/* ---- parsing --------------------------------------------------------- */

/* The index of positional number nth (0-based) of argv (argc: none) and
 * how many there are, options of s and its subcommands skipped with
 * their values. */
static int nth_pos(const dtx__cli_spec_t *s, int argc, char **argv, int nth,
                   int *count) {
  int first = argc, dashdash = 0;
  *count = 0;
  for (int i = 1; i < argc; i++) {
    if (!dashdash && strcmp(argv[i], "--") == 0) {
      dashdash = 1;
      continue;
    }
    if (!dashdash && is_opt(argv[i])) {
      const dtx__cli_opt_t *o = find_opt(s, argv[i], 1);
      if (o && o->type != DTX__CLI_FLAG && !strchr(argv[i], '='))
        i++;
      continue;
    }
    if (first == argc && *count == nth)
      first = i;
    ++*count;
  }
  return first;
}

static int first_pos(const dtx__cli_spec_t *s, int argc, char **argv,
                     int *count) {
  return nth_pos(s, argc, argv, 0, count);
}

/* The subcommand of s that argv names (taken out of argv), or NULL after
 * a usage error. */
static const dtx__cli_spec_t *pick_sub(const dtx__cli_spec_t *s,
                                       dtx__cli_args_t *a, int *argc,
                                       char **argv) {
  int n, k = first_pos(s, *argc, argv, &n), min, more;
  const dtx__cli_spec_t *hit = NULL;
  EACH_SUB(s, c) {
    int max = pos_names(c->args, &min, &more, -1, NULL, 0);
    if (!*c->name && n >= min && (more || n <= max))
      return c; /* the form without a name, which these positionals fit */
    if (*c->name && k < *argc && strcmp(c->name, argv[k]) == 0)
      hit = c;
  }
  if (!hit) {
    /* Too many for the form without a name (transfer A B 5 extra): name
     * the first argument past it, not the first one, which was fine. */
    EACH_SUB(s, c) {
      int max = pos_names(c->args, &min, &more, -1, NULL, 0);
      if (!*c->name && !more && n > max) {
        int x = nth_pos(s, *argc, argv, max, &n);
        dtx__cli_usage("%s: %s takes %d arguments, got %d: unexpected '%s'",
                       a->cmd, c->args, max, n, x < *argc ? argv[x] : "?");
        return NULL;
      }
    }
    char list[256] = "";
    int i = 0, all = 0;
    EACH_SUB(s, c) all += *c->name != 0;
    EACH_SUB(s, c) {
      size_t len = strlen(list);
      if (!*c->name) /* transfer FROM TO AMOUNT, or show, ... */
        snprintf(list + len, sizeof list - len, "%s, or ", c->args);
      else
        snprintf(list + len, sizeof list - len, "%s%s", c->name,
                 ++i == all ? "" : i == all - 1 ? " or " : ", ");
    }
    dtx__cli_usage("%s: expected %s%s%s%s", a->cmd, list,
                   k < *argc ? "; got '" : "", k < *argc ? argv[k] : "",
                   k < *argc ? "'" : "");
    return NULL;
  }
  memmove(argv + k, argv + k + 1, (size_t)(*argc - k) * sizeof *argv);
  --*argc;
  size_t len = strlen(a->cmd);
  snprintf(a->cmd + len, sizeof a->cmd - len, " %s", hit->name);
  return hit;
}

static int bad_number(const dtx__cli_args_t *a, const dtx__cli_opt_t *o,
                      const char *v) {
  if (o->type == DTX__CLI_INT)
    return dtx__cli_usage("%s: %s must be an integer, got '%s'", a->cmd,
                          o->name, v);
  return dtx__cli_usage("%s: %s must be an integer >= %d, got '%s'", a->cmd,
                        o->name, o->type == DTX__CLI_POS, v);
}

/* One option at argv[*i] (its value may be the next argument). */
static int parse_opt(dtx__cli_args_t *a, int argc, char **argv, int *i) {
  const char *arg = argv[*i], *eq = strchr(arg, '=');
  const dtx__cli_opt_t *o = find_opt(a->spec, arg, 0);
  int len = (int)strcspn(arg, "=");
  if (!o)
    return find_opt(a->top, arg, 1)
               ? dtx__cli_usage("%s: %.*s does not apply (see doctx %s "
                                "--help)", a->cmd, len, arg, a->top->name)
               : dtx__cli_usage("%s: unknown option '%.*s' (see doctx %s "
                                "--help)", a->cmd, len, arg, a->top->name);
  int k = (int)(o - a->spec->opts);
  const char *v = "";
  if (a->val[k] && o->type != DTX__CLI_LIST)
    return dtx__cli_usage("%s: option %s given twice", a->cmd, o->name);
  if (o->type == DTX__CLI_FLAG && eq)
    return dtx__cli_usage("%s: option %s takes no value", a->cmd, o->name);
  if (o->type != DTX__CLI_FLAG) {
    if (!eq && *i + 1 >= argc)
      return dtx__cli_usage("%s: option %s needs a value", a->cmd, o->name);
    v = eq ? eq + 1 : argv[++*i];
  }
  if (o->type >= DTX__CLI_INT &&
      (dtx__cli_int64(v, o->type == DTX__CLI_INT, &a->num[k]) != 0 ||
       (o->type == DTX__CLI_POS && a->num[k] < 1)))
    return bad_number(a, o, v);
  if (o->c_int && (a->num[k] > INT_MAX || a->num[k] < INT_MIN))
    return dtx__cli_usage("%s: %s %s is out of range (%d..%d)", a->cmd,
                          o->name, v,
                          o->type == DTX__CLI_INT ? INT_MIN
                                                  : o->type == DTX__CLI_POS,
                          INT_MAX);
  a->val[k] = v;
  a->occ[a->nocc] = k;
  a->occval[a->nocc++] = v;
  return 0;
}

/* The options and positionals of argv for a->spec. */
static int parse(dtx__cli_args_t *a, int argc, char **argv) {
  const dtx__cli_spec_t *s = a->spec;
  int dashdash = 0, ec, min, more;
  char name[64];
  a->pos = calloc((size_t)argc + 1, sizeof *a->pos);
  a->occ = calloc((size_t)argc + 1, sizeof *a->occ);
  a->occval = calloc((size_t)argc + 1, sizeof *a->occval);
  if (!a->pos || !a->occ || !a->occval)
    return dtx__cli_error(DTX_ENOMEM, "parsing arguments");
  for (int i = 1; i < argc; i++) {
    if (!dashdash && strcmp(argv[i], "--") == 0)
      dashdash = 1;
    else if (!dashdash && is_opt(argv[i])) {
      if ((ec = parse_opt(a, argc, argv, &i)))
        return ec;
    } else
      a->pos[a->npos++] = argv[i];
  }
  EACH_OPT(s, o) if (o->required && !a->val[o - s->opts])
    return dtx__cli_usage("%s: %s %s is required", a->cmd, o->name, o->meta);
  /* The library's check of a page, before any store opens. */
  EACH_OPT(s, o) if (strcmp(o->name, "--after") == 0 && a->val[o - s->opts] &&
                     (ec = dtx_page_check(&(dtx_page_t){
                          .after = a->val[o - s->opts]})))
    return dtx__cli_fail(ec);
  int max = pos_names(s->args, &min, &more, a->npos, name, sizeof name);
  if (a->npos < min)
    return dtx__cli_usage("%s: missing argument %s (see doctx %s --help)",
                          a->cmd, name, a->top->name);
  if (!more && a->npos > max)
    return dtx__cli_usage("%s: unexpected argument '%s' (see doctx %s "
                          "--help)", a->cmd, a->pos[max], a->top->name);
  return 0;
}

static void print_help(FILE *f, const dtx__cli_spec_t *top);

int dtx__cli_run(dtx_cli_t *cli, const dtx__cli_spec_t *top, int argc,
                 char **argv) {
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
    if (is_help(argv[i])) {
      print_help(stdout, top);
      return DTX_EXIT_OK;
    }
  dtx__cli_args_t a = {.spec = top, .top = top};
  snprintf(a.cmd, sizeof a.cmd, "%s", top->name);
  int ec = DTX_EXIT_USAGE;
  while (a.spec && a.spec->subs)
    a.spec = pick_sub(a.spec, &a, &argc, argv);
  if (a.spec && !(ec = parse(&a, argc, argv))) {
    cli->open_flags |= a.spec->flags & DTX__CLI_READS ? DTX_OPEN_NOCREATE : 0;
    cli->armed = (a.spec->flags & DTX__CLI_ARMED) != 0;
    ec = a.spec->fn(cli, &a);
  }
  free(a.pos);
  free(a.occ);
  free(a.occval);
  return ec;
}

/* ---- --help ---------------------------------------------------------- */

/* "COLL [FILTER] [--sort S] ..." from column *col. */
static void synopsis(FILE *f, int *col, int indent, const dtx__cli_spec_t *s) {
  char w[128];
  dtx__cli_wrap(f, col, indent, s->args ? s->args : "", 0);
  EACH_OPT(s, o) {
    int opt = !o->required;
    snprintf(w, sizeof w, "%s%s%s%s%s%s", opt ? "[" : "", o->name,
             o->meta ? " " : "", o->meta ? o->meta : "",
             o->type == DTX__CLI_LIST ? " ..." : "", opt ? "]" : "");
    dtx__cli_wrap(f, col, indent, w, 1);
  }
}

/* The usage lines of s's leaves, path their words before s's args. */
static void usage_lines(FILE *f, const dtx__cli_spec_t *s, const char *path,
                        int indent, int *first) {
  char sub[96];
  if (s->subs) {
    EACH_SUB(s, c) {
      snprintf(sub, sizeof sub, "%s%s%s", path, *c->name ? " " : "", c->name);
      usage_lines(f, c, sub, indent, first);
    }
    return;
  }
  int col = fprintf(f, "%s doctx %s", *first ? "usage:" : "      ", path);
  *first = 0;
  synopsis(f, &col, indent, s);
  fputc('\n', f);
}

/* A line for each option with help, its words under each other. */
static void option_lines(FILE *f, const dtx__cli_spec_t *s, int width) {
  char w[64];
  EACH_OPT(s, o) {
    if (!o->help)
      continue;
    snprintf(w, sizeof w, "%s%s%s", o->name, o->meta ? " " : "",
             o->meta ? o->meta : "");
    int col = -fprintf(f, "  %-*s  ", width, w);
    dtx__cli_wrap(f, &col, width + 4, o->help, 0);
    fputc('\n', f);
  }
  EACH_SUB(s, c) option_lines(f, c, width);
}

static int option_width(const dtx__cli_spec_t *s) {
  int w = 0, c;
  EACH_OPT(s, o) if (o->help) {
    c = (int)(strlen(o->name) + (o->meta ? strlen(o->meta) + 1 : 0));
    w = c > w ? c : w;
  }
  EACH_SUB(s, sub) w = (c = option_width(sub)) > w ? c : w;
  return w;
}

static void print_help(FILE *f, const dtx__cli_spec_t *top) {
  int first = 1;
  usage_lines(f, top, top->name, (int)strlen(top->name) + 14, &first);
  fputs(top->text, f);
  option_lines(f, top, option_width(top));
}

/* ---- doctx --help ---------------------------------------------------- */

static const char intro[] =
    "usage: doctx [--store URI] COMMAND [ARGS...]\n"
    "\n"
    "doctx runs atomic single-document updates, and the multi-document\n"
    "transactions built from them, on an embedded or remote store.\n"
    "Documents, filters and updates are JSON in MongoDB's languages; each\n"
    "JSON value is one shell argument, or - to read it from stdin.\n"
    "\n"
    "Document commands:\n";

static const char options[] =
    "\n"
    "Options:\n"
    "  --store URI, --store=URI  the store to use, anywhere on the line:\n"
    "      sqlite:PATH[?sync=full|normal|off]   embedded file (WAL)\n"
    "      sqlite::memory:                      private in-memory store\n"
    "      redis://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][?wait=N\n"
    "              &user=U&password=P&timeout_ms=N&retry_ms=N&buckets=N\n"
    "              &ns=NAME]                    Redis server or Cluster\n"
    "  --help, -h                this text; COMMAND --help for one command\n"
    "  --version                 prints the version\n"
    "  --                        ends the options: what follows is an\n"
    "                            argument, even when it starts with --\n";

static const char tail[] =
    "\n"
    "Environment:\n"
    "  DOCTX_STORE   the store URI when --store is not given\n"
    "                (default sqlite:./doctx.db)\n"
    "\n"
    "Exit codes:\n";

/* Appends name to the list in buf ("a, b, ") unless it is there. */
static void add_name(char *buf, size_t size, const char *name) {
  size_t n = strlen(name);
  for (const char *p = buf; (p = strstr(p, name)); p += n)
    if ((p == buf || p[-1] == ' ') && p[n] == ',')
      return;
  snprintf(buf + strlen(buf), size - strlen(buf), "%s, ", name);
}

void dtx__cli_print_usage(FILE *f, const dtx__cli_spec_t *const *cmds) {
  int col;
  fputs(intro, f);
  for (const dtx__cli_spec_t *const *c = cmds; *c; c++) {
    if (!((*c)->flags & DTX__CLI_DOC))
      continue;
    col = fprintf(f, "  %s", (*c)->name);
    synopsis(f, &col, (int)strlen((*c)->name) + 3, *c);
    if (col > 38) {
      fputc('\n', f);
      col = 0;
    }
    col = -(col + fprintf(f, "%*s", 40 - col, ""));
    dtx__cli_wrap(f, &col, 40, (*c)->summary, 0);
    fputc('\n', f);
  }
  fputs("\nTransaction commands (see doctx COMMAND --help):\n ", f);
  for (const dtx__cli_spec_t *const *c = cmds; *c; c++)
    if (!((*c)->flags & DTX__CLI_DOC))
      fprintf(f, " %s%s", (*c)->name, c[1] ? "," : "\n");
  fputs(options, f);
  char tops[256] = "", subs[256] = "";
  char text[sizeof tops + sizeof subs + 200];
  for (const dtx__cli_spec_t *const *c = cmds; *c; c++) {
    if ((*c)->flags & DTX__CLI_READS)
      add_name(tops, sizeof tops, (*c)->name);
    EACH_SUB(*c, s) if (s->flags & DTX__CLI_READS)
      add_name(subs, sizeof subs, s->name);
  }
  if (*subs)
    subs[strlen(subs) - 2] = '\0'; /* the last ", " */
  snprintf(text, sizeof text,
           "Commands that only read (%sand the subcommands %s) never create "
           "a store: on a SQLite path that does not exist they exit 4 with "
           "\"no store at PATH\".", tops, subs);
  col = 0;
  dtx__cli_wrap(f, &col, 0, text, 0);
  fputc('\n', f);
  fputs(tail, f);
  dtx__cli_print_exit_codes(f);
  fputs("Errors are printed to stderr as \"doctx: ERRNAME: detail\".\n", f);
}
