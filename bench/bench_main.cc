// Benchmark programs' main(); see bench_main.h.
#include "bench/bench_main.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "benchmark/benchmark.h"

namespace fairvault::bench {

int BenchmarkMain(int argc, char** argv, const char* about, void (*after_run)()) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      const char* slash = std::strrchr(argv[0], '/');
      std::printf("usage: %s [--benchmark_filter=REGEX] [--benchmark_* flags below]\n%s\n\n",
                  slash == nullptr ? argv[0] : slash + 1, about);
      std::fflush(stdout);
      // Google Benchmark prints its flags for --help, and exits 0.
      std::string help = "--help";
      char* args[] = {argv[0], help.data(), nullptr};
      int n = 2;
      benchmark::Initialize(&n, args);
      return 0;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (after_run != nullptr) after_run();
  return 0;
}

}  // namespace fairvault::bench
