// clockshift.c: preloaded (LD_PRELOAD) into a server the lab starts, so a
// test can step that server's wall clock while it runs. The offset, in
// nanoseconds, is an int64 in a file the harness writes in place
// (servers.ShiftedClock); it is mapped here once and read on every call, so
// a step takes effect at the server's next clock reading.
//
// Only the wall clock moves (CLOCK_REALTIME, gettimeofday, time): that is
// what an NTP step or a VM restored on another host changes, and what
// Redis's TIME, key expiry and Lua's TIME read. CLOCK_MONOTONIC stays.
//
// No dlsym: the real clock is the syscall itself. libfaketime looks the
// real functions up with dlsym, which allocates, and hangs redis-server at
// start, whose allocator reads the clock before dlsym can run.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const int64_t *offset_ns;

__attribute__((constructor)) static void clockshift_init(void) {
  const char *path = getenv("SECKILL_CLOCK_OFFSET_FILE");
  if (path == NULL) return;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  void *p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p != MAP_FAILED) offset_ns = p;
}

static int64_t offset(void) {
  return offset_ns == NULL ? 0 : __atomic_load_n(offset_ns, __ATOMIC_RELAXED);
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  int r = (int)syscall(SYS_clock_gettime, id, ts);
  if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
    int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + offset();
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
  }
  return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  (void)tz;
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

time_t time(time_t *out) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  if (out != NULL) *out = ts.tv_sec;
  return ts.tv_sec;
}
