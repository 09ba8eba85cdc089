#include "sched/request.h"

namespace strata::sched {

const char* request_status_name(RequestStatus s) {
  switch (s) {
    case RequestStatus::kWaiting:
      return "WAITING";
    case RequestStatus::kRunning:
      return "RUNNING";
    case RequestStatus::kPreempted:
      return "PREEMPTED";
    case RequestStatus::kFinishedStopped:
      return "FINISHED_STOPPED";
    case RequestStatus::kFinishedLength:
      return "FINISHED_LENGTH_CAPPED";
    case RequestStatus::kFinishedAborted:
      return "FINISHED_ABORTED";
  }
  return "?";
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
  }
  return "?";
}

const char* scheduling_policy_name(SchedulingPolicy p) {
  return p == SchedulingPolicy::kPriority ? "priority" : "fcfs";
}

}  // namespace strata::sched
