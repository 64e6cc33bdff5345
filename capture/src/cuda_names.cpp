#include "cgr/capture/cuda_names.hpp"

namespace cgr::capture {

std::string_view capture_status_name(cudaStreamCaptureStatus status) {
  switch (status) {
    case cudaStreamCaptureStatusNone:
      return "None (the stream is not capturing)";
    case cudaStreamCaptureStatusActive:
      return "Active";
    case cudaStreamCaptureStatusInvalidated:
      return "Invalidated (the work did something a capture cannot record, such as a "
             "synchronisation, an allocation or work on the legacy default stream)";
  }
  return "unknown";
}

std::string_view instantiate_result_name(cudaGraphInstantiateResult result) {
  switch (result) {
    case cudaGraphInstantiateSuccess:
      return "Success";
    case cudaGraphInstantiateError:
      return "Error (see the call's return value)";
    case cudaGraphInstantiateInvalidStructure:
      return "InvalidStructure (e.g. a cycle)";
    case cudaGraphInstantiateNodeOperationNotSupported:
      return "NodeOperationNotSupported";
    case cudaGraphInstantiateMultipleDevicesNotSupported:
      return "MultipleDevicesNotSupported";
    case cudaGraphInstantiateConditionalHandleUnused:
      return "ConditionalHandleUnused (a condition without its IF node)";
  }
  return "unknown";
}

std::string_view node_type_name(cudaGraphNodeType type) {
  switch (type) {
    case cudaGraphNodeTypeKernel:
      return "kernel";
    case cudaGraphNodeTypeMemcpy:
      return "memcpy";
    case cudaGraphNodeTypeMemset:
      return "memset";
    case cudaGraphNodeTypeHost:
      return "host";
    case cudaGraphNodeTypeGraph:
      return "child graph";
    case cudaGraphNodeTypeEmpty:
      return "empty";
    case cudaGraphNodeTypeWaitEvent:
      return "event wait";
    case cudaGraphNodeTypeEventRecord:
      return "event record";
    case cudaGraphNodeTypeExtSemaphoreSignal:
      return "external semaphore signal";
    case cudaGraphNodeTypeExtSemaphoreWait:
      return "external semaphore wait";
    case cudaGraphNodeTypeMemAlloc:
      return "memory allocation";
    case cudaGraphNodeTypeMemFree:
      return "memory free";
    case cudaGraphNodeTypeConditional:
      return "conditional";
    default:
      return "unknown";
  }
}

}  // namespace cgr::capture
