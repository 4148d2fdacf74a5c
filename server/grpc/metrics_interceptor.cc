// The metrics interceptor: the call's clock starts when gRPC creates the interceptor (the call
// has arrived) and stops when the server sends the status.
#include "server/grpc/metrics_interceptor.h"

#include <chrono>

#include "google/protobuf/descriptor.h"
#include "server/grpc/services.h"

namespace fairvault::server {
namespace {

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(Metrics* metrics, const char* method)
      : metrics_(metrics),
        method_(method != nullptr ? method : ""),
        start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
      metrics_->RecordRpc(method_, static_cast<int>(methods->GetSendStatus().error_code()),
                          elapsed.count());
    }
    methods->Proceed();
  }

 private:
  Metrics* metrics_;
  const std::string method_;
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace

std::vector<std::string> ServedMethodNames() {
  std::vector<std::string> names = {"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch",
                                    "/grpc.reflection.v1alpha.ServerReflection/"
                                    "ServerReflectionInfo"};
  for (const char* service :
       {v1::RegulatorService::service_full_name(), v1::CompanyService::service_full_name(),
        v1::AuditorService::service_full_name()}) {
    const google::protobuf::ServiceDescriptor* descriptor =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    if (descriptor == nullptr) continue;
    for (int i = 0; i < descriptor->method_count(); ++i) {
      names.push_back("/" + descriptor->full_name() + "/" + descriptor->method(i)->name());
    }
  }
  return names;
}

grpc::experimental::Interceptor* MetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (metrics_ == nullptr) return nullptr;
  return new MetricsInterceptor(metrics_, info->method());
}

}  // namespace fairvault::server
