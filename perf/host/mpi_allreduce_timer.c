/* MPI_Allreduce timer for perf/host/compare_openmpi.sh: float32 sum over the sizes given
 * (bytes), each timed `iters` times after a warm-up; per iteration the slowest rank's time;
 * the median printed per size as "size_bytes median_us min_us max_us" by rank 0. The same
 * definition of time as `topocoll bench` (median iteration time of the slowest rank). */
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
    MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);  /* warm-up */
    for (int i = 0; i < iters; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double mine = (MPI_Wtime() - t0) * 1e6, slowest = 0;
      MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      t[i] = slowest;
    }
    if (rank == 0) {
      qsort(t, iters, sizeof(double), cmp);
      printf("%ld %.1f %.1f %.1f\n", bytes, t[iters / 2], t[0], t[iters - 1]);
      fflush(stdout);
    }
    free(in), free(out), free(t);
  }
  MPI_Finalize();
  return 0;
}
