// The main() of every benchmark program: Google Benchmark's own, plus `-h` (Google Benchmark
// knows only --help) and a usage line saying what the program measures.
#ifndef FAIRVAULT_BENCH_BENCH_MAIN_H_
#define FAIRVAULT_BENCH_BENCH_MAIN_H_

namespace fairvault::bench {

// --help or -h anywhere: prints "usage: PROGRAM [--benchmark_* flags]", `about` and Google
// Benchmark's flags on stdout and returns 0, running nothing. Otherwise runs the registered
// benchmarks as BENCHMARK_MAIN does (1 for an unrecognised flag), then `after_run` if given
// (stopping the servers a program started).
int BenchmarkMain(int argc, char** argv, const char* about, void (*after_run)() = nullptr);

}  // namespace fairvault::bench

#endif  // FAIRVAULT_BENCH_BENCH_MAIN_H_
