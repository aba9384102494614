/*
 * bench/bandwidth.c - the machine's memory read bandwidth (bench/bw_probe.h)
 * with 1..T threads, for the generation bound that bench/model.sh prints
 * beside each model (bandwidth / bytes read per generated token). Not a
 * test; built by bench/model.sh and bench/bandwidth.sh.
 *
 *   bandwidth [--quick] [-t THREADS=2] [-m MIB=1024] [-r RUNS=7] [-w BITS] [--pages 4k|huge|both]
 *
 * --quick: 1 GiB (or -m, before or after it), 5 runs, huge pages, the
 * thread count given only: one to three seconds, so the bound can be
 * measured again next to every model in the same run (bench/model.sh
 * gives -m the model file's size when that is larger), not 256 MiB
 * (8x the 32 MiB L3 of the AMD machine): an Emerald Rapids guest has a
 * 260 MiB L3 shared with other guests, which 256 MiB
 * could partly stay in on a quiet host, while the weights a decode step
 * reads (0.4-2.2 GB, the whole model every token) cannot. Measured there
 * (loaded host) the medians of 64 MiB .. 2 GiB agreed (5-8 GB/s, 1 or 2
 * threads): no size read from L3, and runs of 135-10424 GB/s were an
 * artifact of timing by the caller's clock (bw_probe.h). 1 GiB (4x the
 * L3) removes the question at the price of a second
 * (docs/perf-decisions.md, "The bandwidth bound").
 * -w 128|256|512: load width (bw_probe.h); by default the widest the CPU
 * has (512 bits with AVX-512F: more than 256 in 26 of 28 adjacent pairs
 * on that machine, by 0-25%).
 * Output: one line per measurement,
 *   "read bandwidth: T threads, 4k|huge pages, M MiB: median X GB/s (best Y, N runs)"
 * and with --quick only the median figure on the last line, "bw_gbs X".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bw_probe.h"

int main(int argc, char **argv) {
  int threads = 2, runs = 7, quick = 0, pages = 2; /* pages: 0 4k, 1 huge, 2 both */
  long mib = 1024, mib_arg = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) {
      quick = 1;
      mib = mib_arg ? mib_arg : 1024;
      runs = 5;
      pages = 1;
    } else if (strcmp(a, "-t") == 0 && v) threads = atoi(argv[++i]);
    else if (strcmp(a, "-m") == 0 && v) mib = mib_arg = atol(argv[++i]);
    else if (strcmp(a, "-r") == 0 && v) runs = atoi(argv[++i]);
    else if (strcmp(a, "-w") == 0 && v) bwp_width_bits = atoi(argv[++i]);
    else if (strcmp(a, "-pf") == 0 && v) bwp_pf_dist = (size_t)atol(argv[++i]);
    else if (strcmp(a, "--pages") == 0 && v) {
      i++;
      pages = strcmp(v, "4k") == 0 ? 0 : strcmp(v, "huge") == 0 ? 1 : strcmp(v, "both") == 0 ? 2 : -1;
    } else pages = -1;
    if (pages < 0 || threads < 1 || threads > 16 || runs < 1 || runs > 63 || mib < 1) {
      fprintf(stderr, "usage: bandwidth [--quick] [-t 1..16] [-m MIB] [-r 1..63] [-w 128|256|512] [--pages 4k|huge|both]\n");
      return 2;
    }
  }
  double last = 0;
  for (int pg = 0; pg < 2; pg++) {
    if (pages != 2 && pages != pg) continue;
    size_t bytes = (size_t)mib << 20;
    uint8_t *buf = bwp_alloc(&bytes, pg);
    if (!buf) {
      fprintf(stderr, "bandwidth: cannot map %ld MiB\n", mib);
      return 1;
    }
    for (int t = quick ? threads : 1; t <= threads; t++) {
      double best = 0, med = bwp_measure(buf, bytes, t, runs, &best);
      printf("read bandwidth: %d thread%s, %s pages, %zu MiB: median %.1f GB/s (best %.1f, %d runs)\n", t,
             t > 1 ? "s" : "", pg ? "huge" : "4k", bytes >> 20, med, best, runs);
      last = med;
    }
    bwp_free(buf, bytes);
  }
  if (quick) printf("bw_gbs %.2f\n", last);
  return 0;
}
