#include "worker/train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <sys/stat.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>
#include <mutex>

#include "core/error.h"

namespace dlaunch::worker {
namespace fs = std::filesystem;

namespace {

std::string Dims(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::vector<std::pair<std::string, std::vector<int64_t>>> Shapes(torch::nn::Module& model) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& p : model.named_parameters()) out.emplace_back(p.key(), p.value().sizes().vec());
  for (const auto& b : model.named_buffers()) out.emplace_back(b.key(), b.value().sizes().vec());
  return out;
}

// torch's load would take other shapes silently (Tensor::set_) and fail, or train wrong, later.
void CheckShapes(const std::string& path, const CheckpointManifest& m, torch::nn::Module& model) {
  const auto mine = Shapes(model);
  std::map<std::string, std::vector<int64_t>> theirs(m.shapes.begin(), m.shapes.end());
  for (const auto& [name, dims] : mine) {
    auto it = theirs.find(name);
    if (it == theirs.end()) {
      throw UsageError("train: checkpoint " + path + ": it has no " + name +
                       " (written for another model)");
    }
    if (it->second != dims) {
      throw UsageError("train: checkpoint " + path + ": " + name + " is " + Dims(it->second) +
                       " there and " + Dims(dims) + " in this run's model");
    }
  }
  if (theirs.size() != mine.size()) {
    throw UsageError("train: checkpoint " + path + ": it holds " + std::to_string(theirs.size()) +
                     " tensors, this run's model " + std::to_string(mine.size()));
  }
}

}  // namespace

void SaveCheckpoint(const std::string& dir, CheckpointManifest meta, torch::nn::Module& model,
                    torch::optim::Optimizer& optimizer) {
  const std::string path = CheckpointPath(dir);
  std::string zip;
  try {
    fs::create_directories(dir);
    RemoveStaleCheckpointTemps(dir);
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
    archive.write("model_name", c10::IValue(meta.key.model));
    archive.write("cpu_rng", at::detail::getDefaultCPUGenerator().get_state());
    archive.save_to([&zip](const void* data, size_t n) {
      zip.append(static_cast<const char*>(data), n);
      return n;
    });
  } catch (const std::exception& e) {
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    throw Error(ErrorKind::kInternal,
                "checkpoint: writing " + path +
                    " failed: " + (c10_error ? c10_error->what_without_backtrace() : e.what()));
  }
  meta.shapes = Shapes(model);
  WriteFileAtomically(path, AttachManifest(std::move(zip), meta));
}

std::optional<CheckpointManifest> LoadCheckpoint(const std::string& dir,
                                                 const CheckpointManifest& expect,
                                                 torch::nn::Module& model,
                                                 torch::optim::Optimizer& optimizer) {
  const std::string path = CheckpointPath(dir);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;  // a FIFO exists, and is refused
  CheckpointBytes file;
  try {
    file = ReadCheckpointFile(path);
  } catch (const UsageError& e) {
    throw UsageError(std::string("train: ") + e.what());
  }
  if (file.manifest) {
    const std::string why =
        CheckpointMismatch(*file.manifest, expect.key, expect.per_rank_batch, expect.global_batch);
    if (!why.empty()) throw UsageError("train: checkpoint " + path + ": " + why);
    CheckShapes(path, *file.manifest, model);
  }
  CheckpointManifest meta = file.manifest.value_or(CheckpointManifest{});
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(file.bytes.data(), file.bytes.size());
    // A fresh tensor per key: reading into one that already holds archive storage fails.
    auto read_int = [&archive](const char* key) {
      torch::Tensor t;
      archive.read(key, t);
      return t.item<int64_t>();
    };
    if (!file.manifest) {  // an older dlaunch's: its own fields, and the old rule
      c10::IValue name;
      archive.read("model_name", name);
      meta.key.model = name.toStringRef();
      meta.global_batch = read_int("global_batch");
      meta.world_size = read_int("world_size");
      if (meta.key.model != expect.key.model || meta.global_batch != expect.global_batch) {
        throw UsageError("train: checkpoint " + path + " was written for --model " +
                         meta.key.model + " and global batch " + std::to_string(meta.global_batch) +
                         "; this run has " + expect.key.model + " and " +
                         std::to_string(expect.global_batch));
      }
      meta.step = read_int("step");
      meta.seed = static_cast<uint64_t>(read_int("seed"));
      meta.per_rank_batch = meta.world_size > 0 ? meta.global_batch / meta.world_size : 0;
      meta.steps_per_epoch = 0;
    }
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
