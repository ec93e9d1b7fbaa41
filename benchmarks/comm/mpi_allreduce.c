/* OpenMPI's MPI_Allreduce (float sum) over nccl-tests-style sizes, for comparison with dlaunch's
 * CPU communicator. Built by run_comm_bench.sh with mpicc:
 *   mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 *   mpirun --oversubscribe -np 4 ./mpi_allreduce -b 1K -e 64M -f 4 -w 5 -n 20 --out result.json
 * Rank 0 writes {"world_size", "rows": [{"size", "count", "time_us", "algbw_gbps",
 * "busbw_gbps"}]}, times averaged over ranks, busbw = algbw x 2(n-1)/n as nccl-tests does. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char* text) {
  char* end = NULL;
  size_t v = strtoull(text, &end, 10);
  if (*end == 'K' || *end == 'k') v <<= 10;
  if (*end == 'M' || *end == 'm') v <<= 20;
  if (*end == 'G' || *end == 'g') v <<= 30;
  return v;
}

int main(int argc, char** argv) {
  size_t min_bytes = 8, max_bytes = 64 << 20, factor = 2;
  int warmup = 5, iters = 20;
  const char* out = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) min_bytes = parse_size(argv[i + 1]);
    if (!strcmp(argv[i], "-e")) max_bytes = parse_size(argv[i + 1]);
    if (!strcmp(argv[i], "-f")) factor = strtoull(argv[i + 1], NULL, 10);
    if (!strcmp(argv[i], "-w")) warmup = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--out")) out = argv[i + 1];
  }
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  FILE* f = rank == 0 && out ? fopen(out, "w") : NULL;
  if (f) fprintf(f, "{\"world_size\": %d, \"rows\": [", n);
  int first = 1;
  for (size_t size = min_bytes; size <= max_bytes; size *= factor) {
    size_t count = size / 4 ? size / 4 : 1;
    float* buf = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; ++i) buf[i] = 1.0f;
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i)
      MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double seconds = (MPI_Wtime() - t0) / iters, sum = 0;
    MPI_Allreduce(&seconds, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    seconds = sum / n;
    double algbw = count * 4 / 1e9 / seconds;
    if (f) {
      fprintf(f,
              "%s\n {\"size\": %zu, \"count\": %zu, \"time_us\": %.3f, \"algbw_gbps\": %.4f, "
              "\"busbw_gbps\": %.4f}",
              first ? "" : ",", count * 4, count, seconds * 1e6, algbw,
              algbw * 2 * (n - 1) / n);
    }
    first = 0;
    free(buf);
  }
  if (f) {
    fprintf(f, "\n]}\n");
    fclose(f);
  }
  MPI_Finalize();
  return 0;
}
