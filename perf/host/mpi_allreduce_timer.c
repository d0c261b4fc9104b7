/* MPI_Allreduce timer for perf/host/compare_openmpi.py: float32 sum over the sizes given
 * (bytes), each timed `iters` times after two warm-ups, with the definition of time
 * `topocoll bench` uses (exec/benchmark.cpp): one barrier, then the iterations back to back;
 * each rank's median iteration time (the mean of the middle two for an even count); the
 * largest of the ranks' medians. Printed per size as "size_bytes median_us min_us max_us" by
 * rank 0 (min and max over every rank's iterations). A barrier before every iteration and
 * the median of the per-iteration maxima, as this timer did before, is never below the
 * largest per-rank median: it favoured topocoll. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int iters = 20;
  for (int a = 1; a < argc; ++a) {
    if (strcmp(argv[a], "--iters") == 0 && a + 1 < argc) { iters = atoi(argv[++a]); continue; }
    const long bytes = atol(argv[a]);
    const long count = bytes / 4;
    float* in = malloc(bytes > 0 ? bytes : 4);
    float* out = malloc(bytes > 0 ? bytes : 4);
    for (long i = 0; i < count; ++i) in[i] = (float)((i + rank) % 7);
    double* t = malloc(sizeof(double) * iters);
    for (int w = 0; w < 2; ++w)  /* warm-ups, as bench's default --warmup 2 */
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters; ++i) {
      const double t0 = MPI_Wtime();
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      t[i] = (MPI_Wtime() - t0) * 1e6;
    }
    qsort(t, iters, sizeof(double), cmp);
    const double median = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    double slowest_median = 0, fastest = 0, slowest = 0;
    MPI_Reduce(&median, &slowest_median, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t[0], &fastest, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t[iters - 1], &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      printf("%ld %.1f %.1f %.1f\n", bytes, slowest_median, fastest, slowest);
      fflush(stdout);
    }
    free(in), free(out), free(t);
  }
  MPI_Finalize();
  return 0;
}
