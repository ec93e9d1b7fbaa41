#include "core/run_dir/memory_figures.h"

#include <utility>

#include "core/run_dir/json_fields.h"

namespace dlaunch::rundir {
namespace {

// The one place the keys are spelled.
constexpr std::pair<const char*, int64_t MemoryFigures::*> kFields[] = {
    {"rss_bytes", &MemoryFigures::rss_bytes},
    {"peak_rss_bytes", &MemoryFigures::peak_rss_bytes},
    {"device_allocated_bytes", &MemoryFigures::device_allocated_bytes},
    {"device_reserved_bytes", &MemoryFigures::device_reserved_bytes},
    {"device_peak_bytes", &MemoryFigures::device_peak_bytes},
    {"device_free_bytes", &MemoryFigures::device_free_bytes},
    {"device_total_bytes", &MemoryFigures::device_total_bytes},
};

}  // namespace

bool MemoryFigures::operator==(const MemoryFigures& other) const {
  for (const auto& [key, field] : kFields) {
    if (this->*field != other.*field) return false;
  }
  return true;
}

void PutMemoryFigures(const MemoryFigures& figures, nlohmann::json* obj) {
  for (const auto& [key, field] : kFields) (*obj)[key] = figures.*field;
}

nlohmann::json MemoryFiguresJson(const MemoryFigures& figures) {
  nlohmann::json obj = nlohmann::json::object();
  PutMemoryFigures(figures, &obj);
  return obj;
}

MemoryFigures GetMemoryFigures(const nlohmann::json& obj) {
  MemoryFigures figures;
  for (const auto& [key, field] : kFields) figures.*field = detail::GetInt(obj, key, -1);
  return figures;
}

}  // namespace dlaunch::rundir
