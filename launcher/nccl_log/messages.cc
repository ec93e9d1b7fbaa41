#include "launcher/nccl_log/messages.h"

#include "launcher/nccl_log/line.h"
#include "launcher/nccl_log/parser.h"

namespace dlaunch::launcher::nccl_log {

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

void SkipSpaces(std::string_view* s) {
  while (!s->empty() && (s->front() == ' ' || s->front() == '\t')) s->remove_prefix(1);
}

// Reads an optionally negative decimal at the front of `s`.
bool TakeInt(std::string_view* s, int* value) {
  size_t i = 0;
  bool neg = false;
  if (i < s->size() && (*s)[i] == '-') {
    neg = true;
    ++i;
  }
  size_t b = i;
  int v = 0;
  while (i < s->size() && IsDigit((*s)[i]) && i - b < 9) v = v * 10 + ((*s)[i++] - '0');
  if (i == b) return false;
  *value = neg ? -v : v;
  s->remove_prefix(i);
  return true;
}

// "3[4a000]" -> 3, "4a000"; "3" alone (CollNet) -> 3, "".
bool TakeRankDev(std::string_view* s, int* rank, std::string* dev) {
  if (!TakeInt(s, rank)) return false;
  if (!s->empty() && s->front() == '[') {
    size_t close = s->find(']');
    if (close == std::string_view::npos) return false;
    dev->assign(s->substr(1, close - 1));
    s->remove_prefix(close + 1);
  }
  return true;
}

// "Channel 00/0 : ", "Ring 03 : ", "CollNet 01/1 : " -> channel number and the rest.
bool TakeChannelHead(std::string_view* s, int* channel) {
  std::string_view m = *s;
  if (StartsWith(m, "Channel ")) {
    m.remove_prefix(8);
  } else if (StartsWith(m, "Ring ")) {
    m.remove_prefix(5);
  } else if (StartsWith(m, "CollNet ")) {
    m.remove_prefix(8);
  } else {
    return false;
  }
  if (!TakeInt(&m, channel)) return false;
  size_t colon = m.find(" : ");
  if (colon == std::string_view::npos || colon > 6) return false;
  m.remove_prefix(colon + 3);
  *s = m;
  return true;
}

std::string_view Token(std::string_view s) {
  size_t e = 0;
  while (e < s.size() && s[e] != ' ' && s[e] != ',') ++e;
  return s.substr(0, e);
}

}  // namespace

bool IntAfter(std::string_view s, std::string_view key, int* value) {
  for (size_t p = s.find(key); p != std::string_view::npos; p = s.find(key, p + 1)) {
    if (p > 0 && s[p - 1] != ' ') continue;
    std::string_view rest = s.substr(p + key.size());
    if (TakeInt(&rest, value)) return true;
  }
  return false;
}

void ClassifyVia(Link* link) {
  std::string_view via = link->via;
  if (StartsWith(via, "P2P")) {
    link->transport = Transport::kP2P;
  } else if (StartsWith(via, "SHM") || StartsWith(via, "direct shared memory")) {
    link->transport = Transport::kShm;
  } else if (StartsWith(via, "COLLNET")) {
    link->transport = Transport::kCollNet;
  } else if (StartsWith(via, "NVLS")) {
    link->transport = Transport::kNvls;
  } else if (StartsWith(via, "NET/")) {
    std::string_view rest = via.substr(4);
    size_t slash = rest.find('/');
    link->net.assign(rest.substr(0, slash));
    link->transport = link->net == "IB"       ? Transport::kNetIb
                      : link->net == "Socket" ? Transport::kNetSocket
                                              : Transport::kNetOther;
    if (slash != std::string_view::npos) {
      rest.remove_prefix(slash + 1);
      int dev = -1;
      if (TakeInt(&rest, &dev)) link->net_dev = dev;
    }
  }
  link->gdr = via.find("/GDRDMA") != std::string_view::npos;
}

bool ParseLinkLine(std::string_view message, Link* link, int* channel) {
  size_t via = message.find(" via ");
  if (via == std::string_view::npos) return false;
  std::string_view m = message;
  if (!TakeChannelHead(&m, channel)) return false;
  link->channels.clear();
  link->src_dev.clear();
  link->dst_dev.clear();
  link->dst = -1;
  SkipSpaces(&m);
  if (!TakeRankDev(&m, &link->src, &link->src_dev)) return false;
  SkipSpaces(&m);
  if (StartsWith(m, "-> ")) {
    m.remove_prefix(3);
    if (!TakeRankDev(&m, &link->dst, &link->dst_dev)) return false;
    SkipSpaces(&m);
  }
  link->direction.clear();
  if (StartsWith(m, "[send]")) {
    link->direction = "send";
  } else if (StartsWith(m, "[receive]")) {
    link->direction = "receive";
  }
  size_t v = m.find("via ");
  if (v == std::string_view::npos) return false;
  link->via.assign(m.substr(v + 4));
  link->net.clear();
  link->net_dev = -1;
  link->transport = Transport::kUnknown;
  ClassifyVia(link);
  return true;
}

bool ParseRingOrder(std::string_view message, int* channel, std::vector<int>* order) {
  if (!StartsWith(message, "Channel ") && !StartsWith(message, "Ring ")) return false;
  std::string_view m = message;
  if (!TakeChannelHead(&m, channel)) return false;
  order->clear();
  while (true) {
    SkipSpaces(&m);
    if (m.empty()) break;
    int r = 0;
    if (!TakeInt(&m, &r)) return false;
    if (!m.empty() && m.front() != ' ') return false;
    if (order->size() < 4096) order->push_back(r);
  }
  return !order->empty();
}

std::vector<NetInterface> ParseInterfaces(std::string_view list) {
  std::vector<NetInterface> out;
  while (true) {
    SkipSpaces(&list);
    if (list.empty() || list.front() == ';') break;
    size_t end = list.find(' ');
    std::string_view tok = list.substr(0, end);
    list = end == std::string_view::npos ? std::string_view() : list.substr(end);
    if (!tok.empty() && tok.front() == '[') {
      size_t close = tok.find(']');
      if (close == std::string_view::npos) continue;
      tok.remove_prefix(close + 1);
    }
    if (!tok.empty() && tok.back() == ';') tok.remove_suffix(1);
    size_t colon = tok.find(':');
    if (tok.empty() || colon == 0) continue;
    NetInterface i;
    i.name.assign(tok.substr(0, colon));
    if (colon != std::string_view::npos) i.address.assign(tok.substr(colon + 1));
    if (out.size() < 64) out.push_back(std::move(i));
  }
  return out;
}

bool ParseCommLine(std::string_view message, CommLine* out) {
  size_t c = message.find("comm 0x");
  if (c == std::string_view::npos) c = message.find("comm (nil)");
  if (c == std::string_view::npos || (c > 0 && message[c - 1] != ' ')) return false;
  std::string_view rest = message.substr(c + 5);
  out->ptr.assign(Token(rest));
  IntAfter(rest, "rank ", &out->rank);
  if (!IntAfter(rest, "nranks ", &out->nranks)) IntAfter(rest, "nRanks ", &out->nranks);
  IntAfter(rest, "nNodes ", &out->nnodes);
  IntAfter(rest, "cudaDev ", &out->cuda_dev);
  size_t b = rest.find(" busId ");
  if (b != std::string_view::npos) out->bus_id = NormalizeBusId(Token(rest.substr(b + 7)));
  size_t id = rest.find(" commId ");
  if (id != std::string_view::npos) out->comm_id.assign(Token(rest.substr(id + 8)));
  return out->rank >= 0;
}

bool ParseEnvLine(std::string_view message, std::string* name, std::string* value) {
  static constexpr std::string_view kKey = " set by environment to ";
  size_t p = message.find(kKey);
  if (p == std::string_view::npos) return false;
  std::string_view n = message.substr(0, p);
  size_t sp = n.rfind(' ');
  if (sp != std::string_view::npos) n.remove_prefix(sp + 1);
  std::string_view v = message.substr(p + kKey.size());
  while (!v.empty() && (v.back() == '.' || v.back() == ' ')) v.remove_suffix(1);
  if (n.empty()) return false;
  name->assign(n);
  value->assign(v);
  return true;
}

bool ParseVersion(std::string_view message, std::string* version, std::string* cuda) {
  size_t p = message.find("NCCL version ");
  if (p == std::string_view::npos) return false;
  std::string_view v = Token(message.substr(p + 13));
  if (v.empty() || !IsDigit(v.front())) return false;
  size_t plus = v.find("+cuda");
  version->assign(v.substr(0, plus));
  cuda->clear();
  if (plus != std::string_view::npos) cuda->assign(v.substr(plus + 5));
  return true;
}

bool ParsePathsLine(std::string_view message, std::string* gpu, std::vector<NicDistance>* nets) {
  if (!StartsWith(message, "GPU/")) return false;
  size_t colon = message.find(" : ");
  if (colon == std::string_view::npos) return false;
  std::string_view id = message.substr(4, colon - 4);
  size_t dash = id.find('-');
  if (dash != std::string_view::npos) id.remove_prefix(dash + 1);
  *gpu = NormalizeBusId(id);
  nets->clear();
  std::string_view rest = message.substr(colon + 3);
  for (size_t p = rest.find("NET/"); p != std::string_view::npos; p = rest.find("NET/", p + 4)) {
    std::string_view tail = rest.substr(p);
    size_t open = tail.find(" (");
    size_t close = tail.find(')');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open) break;
    std::string_view inside = tail.substr(open + 2, close - open - 2);  // "3/24.0/PIX"
    size_t last = inside.rfind('/');
    if (last == std::string_view::npos) continue;
    NicDistance d;
    d.nic.assign(tail.substr(0, open));
    d.path.assign(inside.substr(last + 1));
    if (nets->size() < 64) nets->push_back(std::move(d));
  }
  return true;
}

bool ParseNicDistanceLine(std::string_view message, int* cuda_dev, std::vector<NicDistance>* nets) {
  if (!StartsWith(message, "CUDA Dev ")) return false;
  std::string_view m = message.substr(9);
  if (!TakeInt(&m, cuda_dev)) return false;
  size_t comma = m.find(", ");
  size_t key = m.find(" NIC distance :");
  if (comma == std::string_view::npos || key == std::string_view::npos || key < comma) {
    return false;
  }
  std::string net(m.substr(comma + 2, key - comma - 2));
  m.remove_prefix(key + 15);
  nets->clear();
  for (int i = 0;; ++i) {
    SkipSpaces(&m);
    if (m.empty()) break;
    std::string_view t = Token(m);
    m.remove_prefix(t.size());
    if (t.empty()) break;
    nets->push_back({net + "/" + std::to_string(i), std::string(t)});
  }
  return true;
}

}  // namespace dlaunch::launcher::nccl_log
