// Skeleton; the worker pool follows.
#include "server/app/job_runner.h"

namespace fairvault::server {
JobRunner::~JobRunner() = default;
}  // namespace fairvault::server
