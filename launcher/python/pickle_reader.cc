#include "launcher/python/pickle_reader.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/base/format.h"

namespace dlaunch::launcher::python {
namespace {

using nlohmann::json;

// The pickle opcodes of plain data (Lib/pickletools.py names them).
enum Op : uint8_t {
  kMark = '(',
  kStop = '.',
  kNone = 'N',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kBinFloat = 'G',
  kBinString = 'T',
  kShortBinString = 'U',
  kBinUnicode = 'X',
  kBinBytes = 'B',
  kShortBinBytes = 'C',
  kEmptyList = ']',
  kEmptyDict = '}',
  kEmptyTuple = ')',
  kAppend = 'a',
  kAppends = 'e',
  kSetItem = 's',
  kSetItems = 'u',
  kTuple = 't',
  kList = 'l',
  kDict = 'd',
  kPop = '0',
  kPopMark = '1',
  kDup = '2',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kProto = 0x80,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kLong4 = 0x8b,
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kBinBytes8 = 0x8e,
  kMemoize = 0x94,
  kFrame = 0x95,
  kByteArray8 = 0x96,
};

// Objects live in an arena and are referred to by index, so memo references share one object
// (an APPEND after a BINPUT shows through every reference, as in Python) and a cycle cannot leak.
struct Node {
  enum Kind { kScalar, kList, kTuple, kDict } kind = kScalar;
  json scalar;
  std::vector<size_t> items;  // list, tuple; dict: key, value, key, value...
};

// What the reader counts for each thing it allocates (x86-64 libstdc++, malloc's rounding
// included): a memo entry (hash node and bucket), a JSON string or container (the heap object
// behind the value), an object member (the map node: key, value, links).
constexpr size_t kMemoEntryBytes = 40;
constexpr size_t kJsonHeapBytes = 48;
constexpr size_t kJsonMemberBytes = 96;
constexpr size_t kCheckEvery = 4096;  // opcodes or values between looks at the clock

size_t StringHeapBytes(size_t size) { return kJsonHeapBytes + (size > 15 ? size + 1 : 0); }

// Valid UTF-8 as is; any other byte as U+FFFD (three bytes): appended to `out`, or with `out`
// null only counted. Returns the size.
size_t SanitizeUtf8(std::string_view s, std::string* out) {
  size_t size = 0;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok && n == 2 && c < 0xc2) ok = false;  // overlong
    if (ok) {
      if (out) out->append(s.substr(i, n));
      size += n;
      i += n;
    } else {
      if (out) *out += "\xef\xbf\xbd";
      size += 3;
      ++i;
    }
  }
  return size;
}

class Reader {
 public:
  Reader(std::string_view in, const PickleLimits& limits) : in_(in), limits_(limits) {}

  std::optional<json> Run(std::string* error) {
    std::optional<size_t> top = Execute();
    if (!top) {
      *error = error_;
      return std::nullopt;
    }
    json out;
    size_t values = 0, string_bytes = 0;
    if (!ToJson(*top, 0, &values, &string_bytes, &out)) {
      *error = error_;
      return std::nullopt;
    }
    return out;
  }

  void Report(PickleUsage* usage) const {
    usage->peak_memory_bytes = peak_;
    usage->opcodes = opcodes_;
    usage->out_of_time = out_of_time_;
    usage->out_of_memory = out_of_memory_;
  }

 private:
  // What is allocated now: the counted objects and strings, and the stack, marks and memo as
  // they stand (a vector's growth briefly holds its old buffer too, hence the half more).
  size_t InUse() const {
    return counted_ + (stack_.capacity() + marks_.capacity()) * sizeof(size_t) * 3 / 2 +
           memo_.size() * kMemoEntryBytes + memo_.bucket_count() * sizeof(void*);
  }
  bool Charge(size_t bytes) {
    counted_ += bytes;
    const size_t used = InUse();
    if (used <= limits_.max_memory_bytes) {
      peak_ = std::max(peak_, used);
      return true;
    }
    // Refused before it was allocated (the few things counted after are small).
    out_of_memory_ = true;
    return Fail("needs more than " +
                base::FormatBytes(static_cast<int64_t>(limits_.max_memory_bytes)) +
                " to read (at offset " + std::to_string(at_) + ")");
  }
  // Room for one more on `v` (the stack or the marks), grown only within the limit: no opcode
  // pushes more than one.
  bool Room(std::vector<size_t>* v) {
    if (v->size() < v->capacity()) return true;
    const size_t more = std::max<size_t>(v->capacity(), 16);
    if (!Charge(more * sizeof(size_t) * 3 / 2)) return false;
    counted_ -= more * sizeof(size_t) * 3 / 2;  // counted from now on as the capacity
    v->reserve(v->capacity() + more);
    return true;
  }
  bool InTime(size_t count) {
    if (count % kCheckEvery != 0 || std::chrono::steady_clock::now() < limits_.deadline) {
      return true;
    }
    out_of_time_ = true;
    return Fail("stopped at the time limit (at offset " + std::to_string(at_) + ")");
  }
  bool Fail(const std::string& what) {
    error_ = what;
    return false;
  }
  bool Need(size_t n) {
    if (in_.size() - pos_ < n) return Fail("truncated at offset " + std::to_string(pos_));
    return true;
  }
  uint64_t ReadLe(size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i)
      v |= uint64_t(static_cast<unsigned char>(in_[pos_ + i])) << 8 * i;
    pos_ += n;
    return v;
  }
  size_t NewNode(Node::Kind kind, json scalar = nullptr) {
    counted_ += sizeof(Node);
    nodes_.push_back(Node{kind, std::move(scalar), {}});
    return nodes_.size() - 1;
  }
  bool Push(Node::Kind kind, json scalar = nullptr) {
    stack_.push_back(NewNode(kind, std::move(scalar)));
    return true;
  }
  // A container's items, counted before they grow.
  bool AddItems(Node& t, std::vector<size_t>::const_iterator begin,
                std::vector<size_t>::const_iterator end) {
    const size_t size = t.items.size() + static_cast<size_t>(end - begin);
    if (size > t.items.capacity()) {
      const size_t capacity = std::max(size, t.items.capacity() * 2);
      if (!Charge((capacity - t.items.capacity()) * sizeof(size_t))) return false;
      t.items.reserve(capacity);
    }
    t.items.insert(t.items.end(), begin, end);
    return true;
  }
  bool Pop(size_t* out) {
    if (stack_.size() <= Floor()) return Fail("stack underflow at offset " + std::to_string(at_));
    *out = stack_.back();
    stack_.pop_back();
    return true;
  }
  size_t Floor() const { return marks_.empty() ? 0 : marks_.back(); }
  // The objects above the topmost mark, and the mark removed.
  bool PopMark(std::vector<size_t>* out) {
    if (marks_.empty()) return Fail("no mark at offset " + std::to_string(at_));
    const size_t m = marks_.back();
    marks_.pop_back();
    out->assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return true;
  }
  bool Text(size_t n) {
    if (!Need(n)) return false;
    // Counted (invalid UTF-8 triples) and refused before it is copied.
    std::string_view raw = in_.substr(pos_, n);
    pos_ += n;
    const size_t size = SanitizeUtf8(raw, nullptr);
    if (!Charge(StringHeapBytes(size))) return false;
    std::string text;
    text.reserve(size);
    SanitizeUtf8(raw, &text);
    return Push(Node::kScalar, std::move(text));
  }
  bool Long(size_t n) {
    if (n > 8)
      return Fail("integer of " + std::to_string(n) + " bytes at offset " + std::to_string(at_) +
                  " is too large");
    if (!Need(n)) return false;
    uint64_t v = ReadLe(n);
    if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return Push(Node::kScalar, static_cast<int64_t>(v));
  }
  bool Extend(size_t target, const std::vector<size_t>& items, Node::Kind want) {
    Node& t = nodes_[target];
    if (t.kind != want) {
      return Fail(std::string(want == Node::kList ? "APPEND" : "SETITEM") +
                  " on the wrong kind of object at offset " + std::to_string(at_));
    }
    if (want == Node::kDict && items.size() % 2 != 0) {
      return Fail("odd SETITEMS at offset " + std::to_string(at_));
    }
    return AddItems(t, items.begin(), items.end());
  }
  bool Put(uint64_t index) {
    if (stack_.empty()) return Fail("memo of nothing at offset " + std::to_string(at_));
    memo_[index] = stack_.back();
    return true;
  }
  bool Get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) {
      return Fail("memo " + std::to_string(index) + " unknown at offset " + std::to_string(at_));
    }
    stack_.push_back(it->second);
    return true;
  }

  bool Step(uint8_t op, bool* stop) {
    size_t a = 0, b = 0, c = 0;
    std::vector<size_t> items;
    switch (op) {
      case kProto: {
        if (!Need(1)) return false;
        const auto v = static_cast<unsigned char>(in_[pos_++]);
        if (v < 2 || v > 5) return Fail("pickle protocol " + std::to_string(v) + " not read");
        return true;
      }
      case kFrame:
        if (!Need(8)) return false;
        pos_ += 8;  // the frame length is a hint to buffered readers
        return true;
      case kStop:
        *stop = true;
        return true;
      case kMark:
        marks_.push_back(stack_.size());
        return true;
      case kNone:
        return Push(Node::kScalar, nullptr);
      case kNewTrue:
        return Push(Node::kScalar, true);
      case kNewFalse:
        return Push(Node::kScalar, false);
      case kBinInt:
        if (!Need(4)) return false;
        return Push(Node::kScalar, static_cast<int64_t>(static_cast<int32_t>(ReadLe(4))));
      case kBinInt1:
        if (!Need(1)) return false;
        return Push(Node::kScalar, static_cast<int64_t>(ReadLe(1)));
      case kBinInt2:
        if (!Need(2)) return false;
        return Push(Node::kScalar, static_cast<int64_t>(ReadLe(2)));
      case kLong1:
        if (!Need(1)) return false;
        return Long(ReadLe(1));
      case kLong4:
        if (!Need(4)) return false;
        return Long(ReadLe(4));
      case kBinFloat: {
        if (!Need(8)) return false;
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = bits << 8 | static_cast<unsigned char>(in_[pos_ + i]);
        pos_ += 8;
        double d;
        std::memcpy(&d, &bits, sizeof d);
        return Push(Node::kScalar, d);  // nan and inf become null in JSON
      }
      case kShortBinUnicode:
      case kShortBinString:
      case kShortBinBytes:
        if (!Need(1)) return false;
        return Text(ReadLe(1));
      case kBinUnicode:
      case kBinString:
      case kBinBytes:
        if (!Need(4)) return false;
        return Text(ReadLe(4));
      case kBinUnicode8:
      case kBinBytes8:
      case kByteArray8:
        if (!Need(8)) return false;
        return Text(ReadLe(8));
      case kEmptyList:
        return Push(Node::kList);
      case kEmptyDict:
        return Push(Node::kDict);
      case kEmptyTuple:
        return Push(Node::kTuple);
      case kAppend:
        if (!Pop(&a) || !Pop(&b)) return false;
        stack_.push_back(b);
        return Extend(b, {a}, Node::kList);
      case kAppends:
        if (!PopMark(&items) || !Pop(&b)) return false;
        stack_.push_back(b);
        return Extend(b, items, Node::kList);
      case kSetItem:
        if (!Pop(&a) || !Pop(&b) || !Pop(&c)) return false;
        stack_.push_back(c);
        return Extend(c, {b, a}, Node::kDict);
      case kSetItems:
        if (!PopMark(&items) || !Pop(&b)) return false;
        stack_.push_back(b);
        return Extend(b, items, Node::kDict);
      case kTuple:
      case kList:
      case kDict: {
        if (!PopMark(&items)) return false;
        const Node::Kind kind = op == kTuple  ? Node::kTuple
                                : op == kList ? Node::kList
                                              : Node::kDict;
        if (kind == Node::kDict && items.size() % 2 != 0) return Fail("odd DICT");
        stack_.push_back(NewNode(kind));
        return AddItems(nodes_.back(), items.begin(), items.end());
      }
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const size_t n = op - kTuple1 + 1;
        if (stack_.size() < Floor() + n)
          return Fail("stack underflow at offset " + std::to_string(at_));
        items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        stack_.push_back(NewNode(Node::kTuple));
        return AddItems(nodes_.back(), items.begin(), items.end());
      }
      case kPop:
        if (stack_.size() > Floor()) {
          stack_.pop_back();
          return true;
        }
        return PopMark(&items);
      case kPopMark:
        return PopMark(&items);
      case kDup:
        if (stack_.size() <= Floor())
          return Fail("DUP of nothing at offset " + std::to_string(at_));
        stack_.push_back(stack_.back());
        return true;
      case kBinPut:
        if (!Need(1)) return false;
        return Put(ReadLe(1));
      case kLongBinPut:
        if (!Need(4)) return false;
        return Put(ReadLe(4));
      case kMemoize:
        return Put(memo_.size());
      case kBinGet:
        if (!Need(1)) return false;
        return Get(ReadLe(1));
      case kLongBinGet:
        if (!Need(4)) return false;
        return Get(ReadLe(4));
      default: {
        char name[32];
        std::snprintf(name, sizeof name, "0x%02x", op);
        std::string shown = op >= 0x20 && op < 0x7f ? std::string(" ('") + char(op) + "')" : "";
        return Fail(std::string("unsupported opcode ") + name + shown + " at offset " +
                    std::to_string(at_) + ": only plain data is read");
      }
    }
  }

  std::optional<size_t> Execute() {
    bool stop = false;
    while (!stop) {
      if (pos_ >= in_.size()) {
        Fail(in_.empty() ? "empty input" : "truncated at offset " + std::to_string(pos_));
        return std::nullopt;
      }
      at_ = pos_;
      const auto op = static_cast<uint8_t>(in_[pos_++]);
      if (!Room(&stack_) || !Room(&marks_) || !Step(op, &stop) || !Charge(0) ||
          !InTime(++opcodes_)) {
        return std::nullopt;
      }
    }
    if (stack_.size() != 1 || !marks_.empty()) {
      Fail("STOP with " + std::to_string(stack_.size()) + " objects on the stack");
      return std::nullopt;
    }
    return stack_.back();
  }

  bool ToJson(size_t index, size_t depth, size_t* values, size_t* string_bytes, json* out) {
    if (depth > limits_.max_depth)
      return Fail("nested deeper than " + std::to_string(limits_.max_depth));
    if (++*values > limits_.max_values) {
      return Fail("more than " + std::to_string(limits_.max_values) + " values");
    }
    if (!InTime(*values)) return false;
    const Node& n = nodes_[index];
    switch (n.kind) {
      case Node::kScalar:
        if (n.scalar.is_string()) {
          const size_t size = n.scalar.get_ref<const std::string&>().size();
          *string_bytes += size;
          if (*string_bytes > limits_.max_string_bytes) {
            return Fail("strings of more than " +
                        base::FormatBytes(static_cast<int64_t>(limits_.max_string_bytes)));
          }
          if (!Charge(StringHeapBytes(size))) return false;
        }
        *out = n.scalar;
        return true;
      case Node::kList:
      case Node::kTuple:
        if (!Charge(kJsonHeapBytes + n.items.size() * sizeof(json))) return false;
        *out = json::array();
        out->get_ref<json::array_t&>().reserve(n.items.size());
        for (size_t item : n.items) {
          json v;
          if (!ToJson(item, depth + 1, values, string_bytes, &v)) return false;
          out->push_back(std::move(v));
        }
        return true;
      case Node::kDict:
        if (!Charge(kJsonHeapBytes)) return false;
        *out = json::object();
        for (size_t i = 0; i + 1 < n.items.size(); i += 2) {
          const Node& key = nodes_[n.items[i]];
          std::string k;
          if (key.kind == Node::kScalar && key.scalar.is_string()) {
            k = key.scalar.get<std::string>();
          } else if (key.kind == Node::kScalar && key.scalar.is_number_integer()) {
            k = std::to_string(key.scalar.get<int64_t>());
          } else {
            return Fail("a dict key that is not a string or an int");
          }
          if (!Charge(kJsonMemberBytes + (k.size() > 15 ? k.size() + 1 : 0))) return false;
          json v;
          if (!ToJson(n.items[i + 1], depth + 1, values, string_bytes, &v)) return false;
          (*out)[k] = std::move(v);
        }
        return true;
    }
    return Fail("bad node");
  }

  std::string_view in_;
  const PickleLimits& limits_;
  size_t pos_ = 0, at_ = 0;
  size_t counted_ = 0, peak_ = 0, opcodes_ = 0;
  bool out_of_time_ = false, out_of_memory_ = false;
  std::deque<Node> nodes_;  // no reallocation: its memory grows by what each node takes
  std::vector<size_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, size_t> memo_;
  std::string error_;
};

}  // namespace

std::optional<nlohmann::json> ReadPickle(std::string_view bytes, std::string* error,
                                         const PickleLimits& limits, PickleUsage* usage) {
  PickleUsage ignored;
  if (usage == nullptr) usage = &ignored;
  *usage = {};
  try {
    Reader reader(bytes, limits);
    std::optional<nlohmann::json> out = reader.Run(error);
    reader.Report(usage);
    return out;
  } catch (const std::bad_alloc&) {  // the heap ran out before the count did: never a crash
    usage->out_of_memory = true;
    *error = "out of memory while reading";
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return std::nullopt;
}

}  // namespace dlaunch::launcher::python
