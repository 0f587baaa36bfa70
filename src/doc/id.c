/* id.c -- document ids, _id validation and the wall clock.
 *
 * Generated ids follow MongoDB's ObjectId layout so they sort by creation
 * time and never collide across processes or threads:
 *
 *   | 4 bytes: unix seconds, big-endian | 5 bytes: per-process random |
 *   | 3 bytes: counter, big-endian, starting at a random value           |
 *
 * written as 24 lowercase hex digits.  The random part is drawn once per
 * process; a forked child notices that its pid changed and draws its own,
 * otherwise parent and child would hand out identical ids.
 */
#include "doc/doc.h"
#include "util/err.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define ID_STR_MAX 256

static pthread_mutex_t seed_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic pid_t seeded_pid; /* 0 until seeded; pids are never 0 */
static unsigned char proc_rand[5];
static _Atomic uint32_t counter;

static void fill_random(unsigned char *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(buf + got, n - got, 0);
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  if (got == n)
    return;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    while (got < n) {
      ssize_t r = read(fd, buf + got, n - got);
      if (r <= 0)
        break;
      got += (size_t)r;
    }
    close(fd);
  }
  if (got == n)
    return;
  /* Last resort: time and pid are weak but still differ between processes,
   * which is all the random part has to achieve. */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
               ((uint64_t)getpid() << 40);
  for (; got < n; got++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    buf[got] = (unsigned char)x;
  }
}

/* Seeds on first use and again after fork().  The double check keeps the
 * common path to one atomic load; the lock only orders the rare re-seed. */
static void ensure_seeded(void) {
  pid_t pid = getpid();
  if (atomic_load_explicit(&seeded_pid, memory_order_acquire) == pid)
    return;
  pthread_mutex_lock(&seed_lock);
  if (atomic_load_explicit(&seeded_pid, memory_order_relaxed) != pid) {
    unsigned char r[8];
    fill_random(r, sizeof r);
    memcpy(proc_rand, r, 5);
    atomic_store(&counter, (uint32_t)r[5] << 16 | (uint32_t)r[6] << 8 | r[7]);
    atomic_store_explicit(&seeded_pid, pid, memory_order_release);
  }
  pthread_mutex_unlock(&seed_lock);
}

void dtx__id_new(char out[25]) {
  static const char hex[] = "0123456789abcdef";
  unsigned char b[12];
  ensure_seeded();
  uint32_t secs = (uint32_t)time(NULL);
  uint32_t c = atomic_fetch_add(&counter, 1) & 0xffffff;
  b[0] = (unsigned char)(secs >> 24);
  b[1] = (unsigned char)(secs >> 16);
  b[2] = (unsigned char)(secs >> 8);
  b[3] = (unsigned char)secs;
  memcpy(b + 4, proc_rand, 5);
  b[9] = (unsigned char)(c >> 16);
  b[10] = (unsigned char)(c >> 8);
  b[11] = (unsigned char)c;
  for (int i = 0; i < 12; i++) {
    out[2 * i] = hex[b[i] >> 4];
    out[2 * i + 1] = hex[b[i] & 15];
  }
  out[24] = '\0';
}

/* MongoDB accepts any _id but an array (and a regex, which JSON cannot
 * express).  Objects may not hold '$'-prefixed or dotted field names at
 * any depth (the manual's "General Restrictions"), and arrays inside an
 * object are fine.  The limits keep every backend's key for an _id short:
 * strings up to ID_STR_MAX bytes, objects up to ID_OBJ_MAX bytes of JSON. */
#define ID_OBJ_MAX 1024

static int obj_names_ok(const json_t *v, int depth, size_t *size,
                        const char **bad) {
  const char *k;
  json_t *x;
  size_t i;
  if (depth > 32) {
    *bad = "(nested too deeply)";
    return 0;
  }
  *size += 2;
  if (json_is_object(v)) {
    json_object_foreach((json_t *)v, k, x) {
      if (k[0] == '$' || strchr(k, '.')) {
        *bad = k;
        return 0;
      }
      *size += strlen(k) + 4;
      if (!obj_names_ok(x, depth + 1, size, bad))
        return 0;
    }
  } else if (json_is_array(v)) {
    json_array_foreach(v, i, x) if (!obj_names_ok(x, depth + 1, size, bad))
        return 0;
  } else if (json_is_string(v)) {
    *size += json_string_length(v);
  } else {
    *size += 24;
  }
  return 1;
}

int dtx__id_check(const json_t *id) {
  if (!id)
    return dtx__err(DTX_EINVAL, "_id is missing");
  switch (json_typeof(id)) {
  case JSON_INTEGER:
  case JSON_REAL:
  case JSON_NULL:
  case JSON_TRUE:
  case JSON_FALSE:
    return 0;
  case JSON_STRING: {
    size_t n = json_string_length(id);
    if (n == 0 || n > ID_STR_MAX)
      return dtx__err(DTX_EINVAL, "_id string must be 1 to %d bytes long",
                      ID_STR_MAX);
    return 0;
  }
  case JSON_OBJECT: {
    size_t size = 0;
    const char *bad = NULL;
    if (!obj_names_ok(id, 0, &size, &bad))
      return dtx__err(DTX_EINVAL,
                      "_id object field name '%s' may not start with '$' or "
                      "contain '.'",
                      bad);
    if (size > ID_OBJ_MAX)
      return dtx__err(DTX_EINVAL, "_id object is longer than %d bytes",
                      ID_OBJ_MAX);
    return 0;
  }
  case JSON_ARRAY:
    break;
  }
  return dtx__err(DTX_EINVAL, "_id cannot be an array");
}

int dtx__id_valid(const json_t *id) {
  if (!id || json_is_array(id))
    return 0;
  if (json_is_string(id))
    return json_string_length(id) > 0 && json_string_length(id) <= ID_STR_MAX;
  if (json_is_object(id)) {
    size_t size = 0;
    const char *bad;
    return obj_names_ok(id, 0, &size, &bad) && size <= ID_OBJ_MAX;
  }
  return 1;
}

int64_t dtx__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
