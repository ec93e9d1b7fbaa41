#include "worker/train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <mutex>

#include "core/error.h"

namespace dlaunch::worker {
namespace fs = std::filesystem;

std::string CheckpointPath(const std::string& dir) { return dir + "/checkpoint.pt"; }

void SaveCheckpoint(const std::string& dir, const CheckpointMeta& meta, torch::nn::Module& model,
                    torch::optim::Optimizer& optimizer) {
  const std::string path = CheckpointPath(dir);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    fs::create_directories(dir);
    torch::serialize::OutputArchive archive;
    torch::serialize::OutputArchive model_archive, optim_archive;
    model.save(model_archive);
    optimizer.save(optim_archive);
    archive.write("model", model_archive);
    archive.write("optimizer", optim_archive);
    archive.write("step", torch::tensor(meta.step, torch::kInt64));
    archive.write("seed", torch::tensor(static_cast<int64_t>(meta.seed), torch::kInt64));
    archive.write("world_size", torch::tensor(meta.world_size, torch::kInt64));
    archive.write("global_batch", torch::tensor(meta.global_batch, torch::kInt64));
    archive.write("model_name", c10::IValue(meta.model));
    archive.write("cpu_rng", at::detail::getDefaultCPUGenerator().get_state());
    archive.save_to(tmp);
    // Durable before the rename: otherwise a power cut could leave the new name on empty data.
    if (FILE* f = std::fopen(tmp.c_str(), "rb")) {
      ::fsync(fileno(f));
      std::fclose(f);
    }
    fs::rename(tmp, path);
  } catch (const std::exception& e) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    throw Error(ErrorKind::kInternal,
                "checkpoint: writing " + path +
                    " failed: " + (c10_error ? c10_error->what_without_backtrace() : e.what()));
  }
}

std::optional<CheckpointMeta> LoadCheckpoint(const std::string& dir, const CheckpointMeta& expect,
                                             torch::nn::Module& model,
                                             torch::optim::Optimizer& optimizer) {
  const std::string path = CheckpointPath(dir);
  if (!fs::exists(path)) return std::nullopt;
  CheckpointMeta meta;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    c10::IValue name;
    archive.read("model_name", name);
    meta.model = name.toStringRef();
    // A fresh tensor per key: reading into one that already holds archive storage fails.
    auto read_int = [&archive](const char* key) {
      torch::Tensor t;
      archive.read(key, t);
      return t.item<int64_t>();
    };
    meta.global_batch = read_int("global_batch");
    if (meta.model != expect.model || meta.global_batch != expect.global_batch) {
      throw UsageError("train: checkpoint " + path + " was written for --model " + meta.model +
                       " and global batch " + std::to_string(meta.global_batch) +
                       "; this run has " + expect.model + " and " +
                       std::to_string(expect.global_batch));
    }
    meta.step = read_int("step");
    meta.seed = static_cast<uint64_t>(read_int("seed"));
    meta.world_size = read_int("world_size");
    torch::serialize::InputArchive model_archive, optim_archive;
    archive.read("model", model_archive);
    archive.read("optimizer", optim_archive);
    model.load(model_archive);
    optimizer.load(optim_archive);
    torch::Tensor rng;
    archive.read("cpu_rng", rng);
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng);
  } catch (const dlaunch::Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw Error(ErrorKind::kInternal,
                "checkpoint: reading " + path + " failed: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kInternal, "checkpoint: reading " + path + " failed: " + e.what());
  }
  return meta;
}

}  // namespace dlaunch::worker
