/*
 * util.h - small helpers every module uses: clocks, random ids, constant-time
 * comparison, checked arithmetic, read-only file mapping.
 */
#ifndef PARLEY_BASE_UTIL_H
#define PARLEY_BASE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Monotonic clock in nanoseconds / wall clock in seconds and milliseconds. */
uint64_t time_mono_ns(void);
int64_t time_wall_s(void);
int64_t time_wall_ms(void);

/* Fills out with n random bytes from the kernel (getrandom). */
int rand_bytes(void *out, size_t n);
/* Writes prefix followed by 2*n_bytes lowercase hex digits and a NUL into out
 * (cap bytes). Returns 0 or ERR_TOO_LARGE when cap is too small. */
int id_make(char *out, size_t cap, const char *prefix, size_t n_bytes);
/* A random RFC 4122 version-4 UUID, 36 characters plus NUL (cap >= 37). */
int id_uuid(char *out, size_t cap);

/* Compares two byte strings in time that depends only on their lengths. */
bool ct_equal(const void *a, size_t alen, const void *b, size_t blen);

/* a*b and a+b with overflow detection: return false on overflow. */
static inline bool size_mul(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool size_add(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }

/* Maps the regular file at path read-only (MAP_PRIVATE) into *base, *size
 * bytes; the caller munmaps it. Errors are prefixed with who ("gguf") and
 * name the file: ERR_IO when it cannot be opened, is not a regular file or
 * cannot be mapped, ERR_PARSE when it is shorter than min_size bytes (then
 * it is "not a <kind>"). */
int file_map_ro(const char *path, const char *who, const char *kind, size_t min_size, const void **base, size_t *size);

/* Caps glibc's malloc arenas at n (mallopt M_ARENA_MAX) unless the
 * environment set MALLOC_ARENA_MAX; a no-op elsewhere. glibc's default (8 per
 * core) gives each thread that allocates while another holds an arena a new
 * one, and a server that starts a thread per stream keeps adding arenas and
 * scattering small blocks over them: resident memory grew without bound
 * under a soak (docs/perf.md "Soak"). Call before starting threads. */
void malloc_bound_arenas(int n);

/* The allocator's own figures, in bytes: in_use is what live blocks hold,
 * free what it keeps for reuse (fragmented or not yet returned), arena the
 * heap it has from the system (in_use + free), mmapped the large blocks
 * mapped one by one. All 0 where the C library cannot tell (not glibc). */
typedef struct malloc_stats_bytes {
  uint64_t in_use, free, arena, mmapped;
} malloc_stats_bytes;
void malloc_stats_read(malloc_stats_bytes *out);

/* A thread that hands the allocator's free pages back to the system every
 * period_ms (glibc's malloc_trim(0): free chunks inside every arena are
 * madvised away and the heap tops shrunk). glibc returns memory only from
 * the top of a heap, so under a long mixed load the pages of blocks freed in
 * the middle stay resident: the soak's RSS grew though nothing leaked and
 * the heap in use stayed flat (docs/perf.md "Soak"). A no-op returning 0
 * where the C library has no malloc_trim; ERR_INTERNAL when the thread
 * cannot start. malloc_trimmer_stop joins it (safe without a start). */
int malloc_trimmer_start(int period_ms);
void malloc_trimmer_stop(void);

/* strdup that returns NULL for NULL. */
char *str_dup(const char *s);
char *str_ndup(const char *s, size_t n);
bool str_starts_with(const char *s, const char *prefix);
bool str_ends_with(const char *s, const char *suffix);

/* Length of the well-formed UTF-8 sequence at s[0..n) (1-4), or 0 when the
 * bytes there are not one (a stray continuation byte, a cut sequence, an
 * overlong form, a surrogate, past U+10FFFF): the same rule as jansson's,
 * which refuses to make a JSON string of such bytes. */
size_t utf8_seq_len(const char *s, size_t n);
/* True when all of s[0..n) is well-formed UTF-8. */
bool utf8_valid(const char *s, size_t n);
/* A malloc'd copy of the NUL-terminated s with every byte that does not
 * start a well-formed sequence replaced by U+FFFD; NULL for NULL or out of
 * memory. For text that echoes client bytes into a JSON answer (an error
 * message quoting a bad query value, or cut at a byte count). */
char *str_utf8_lossy(const char *s);

#endif
