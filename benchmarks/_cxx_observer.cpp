// A global RecordFunction observer of ATen ops for benchmarks/bench_cxx_observer.py (issue 17):
// how much of the cost of recording every op could a C++ observer save over fwd9m's
// TorchDispatchMode recorder? Not part of the product. Built on first use by
// torch.utils.cpp_extension.load_inline.
//
// What it relies on (torch 2.13 headers, include/ATen/...):
// - record_function.h: at::addGlobalCallback(RecordFunctionCallback(start, end)) with
//   .scopes({FUNCTION}) (ATen ops; BACKWARD_FUNCTION is autograd nodes), .needsInputs /
//   .needsOutputs (RecordFunction::inputs() valid in the start callback, outputs() in the end
//   callback), sampling probability left at 1.0 (every op).
// - core/dispatch/Dispatcher.h: Dispatcher::call and callBoxed run the callbacks for observed
//   operators (OperatorEntry::isObserved); redispatch never does. With needsOutputs the kernel
//   runs through CaptureKernelCall and the outputs are copied into the RecordFunction.
// - torch/csrc/autograd/node.h: Node::operator() opens a BACKWARD_FUNCTION RecordFunction
//   around each autograd node; the ATen ops the node calls are FUNCTION scope again.
#include <torch/extension.h>
#include <ATen/record_function.h>
#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace {

struct Rec {
  uint64_t seq;      // op number since reset (FUNCTION scope starts)
  const char* name;  // the op's name, interned
  uint64_t digest;   // digest of one tensor's bytes
  int32_t slot;      // output index (>= 0) or -1 - input index
  int32_t in_bwd;    // 1 when recorded inside an autograd node (BACKWARD_FUNCTION scope)
};

constexpr size_t CAP = 1 << 20;
std::vector<Rec> buf(CAP);
std::atomic<uint64_t> n_rec{0}, n_ops{0}, n_bwd_nodes{0}, n_bytes{0}, n_copies{0};
thread_local int bwd_depth = 0;
at::CallbackHandle handle = 0, bwd_handle = 0;
bool installed = false;
bool do_digest = true;  // false: variant 3 (outputs captured, not read)
bool leaf_only = false;  // variant 4: outputs of leaf ops only, views skipped

constexpr uint64_t P0 = 0x9E3779B97F4A7C15ULL, P1 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t P2 = 0x165667B19E3779F9ULL, P3 = 0xD6E8FEB86659FD93ULL;

inline uint64_t fmix(uint64_t x) {
  x ^= x >> 33; x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33; x *= 0xC4CEB9FE1A85EC53ULL;
  return x ^ (x >> 33);
}

// exact 64-bit digest of n bytes: four independent multiply-xor lanes over 8-byte words
// (odd multipliers: each step is a bijection of the word), the tail zero-padded, the
// length folded in
uint64_t digest_bytes(const unsigned char* p, size_t n) {
  uint64_t h0 = 1, h1 = 2, h2 = 3, h3 = 4, w;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    std::memcpy(&w, p + i, 8);      h0 = (h0 ^ w) * P0;
    std::memcpy(&w, p + i + 8, 8);  h1 = (h1 ^ w) * P1;
    std::memcpy(&w, p + i + 16, 8); h2 = (h2 ^ w) * P2;
    std::memcpy(&w, p + i + 24, 8); h3 = (h3 ^ w) * P3;
  }
  for (; i + 8 <= n; i += 8) { std::memcpy(&w, p + i, 8); h0 = (h0 ^ w) * P0; }
  if (i < n) { w = 0; std::memcpy(&w, p + i, n - i); h1 = (h1 ^ w) * P1; }
  return fmix(h0 ^ fmix(h1 + P2) ^ fmix(h2 + P3) ^ fmix(h3) ^ (n * P1));
}

uint64_t digest_tensor(const at::Tensor& t) {
  if (!t.defined() || t.layout() != at::kStrided || !t.device().is_cpu()) return 0;
  size_t nbytes = static_cast<size_t>(t.numel()) * t.element_size();
  if (nbytes == 0) return fmix(0);
  n_bytes.fetch_add(nbytes, std::memory_order_relaxed);
  if (t.is_non_overlapping_and_dense()) {  // memory order, no copy (as fwd9m's digest)
    return digest_bytes(static_cast<const unsigned char*>(t.const_data_ptr()), nbytes);
  }
  n_copies.fetch_add(1, std::memory_order_relaxed);
  at::DisableRecordFunctionGuard off;  // the copy's own ops are not observed
  at::Tensor c = t.contiguous();
  return digest_bytes(static_cast<const unsigned char*>(c.const_data_ptr()), nbytes);
}

inline void put(uint64_t seq, const char* name, const at::Tensor& t, int32_t slot) {
  uint64_t i = n_rec.fetch_add(1, std::memory_order_relaxed);
  buf[i % CAP] = Rec{seq, name, do_digest ? digest_tensor(t) : 0, slot, bwd_depth > 0};
}

void put_values(uint64_t seq, const char* name, c10::ArrayRef<const c10::IValue> vs, bool inputs) {
  int32_t k = 0;
  for (const auto& v : vs) {
    if (leaf_only && v.isTensor() && v.toTensor().is_view()) {
      k++;  // a view's bytes were digested when its base was written
    } else if (v.isTensor()) {
      put(seq, name, v.toTensor(), inputs ? -1 - k : k);
      k++;
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) { put(seq, name, t, inputs ? -1 - k : k); k++; }
    }
  }
}

// the op's number, and the op it runs inside: an op during which no other op started is
// a leaf (aten::linear is not, the aten::addmm inside it is)
// RecordFunction::name() points into the schema for dispatcher ops, but into the
// RecordFunction itself for ranges opened by name (RECORD_FUNCTION("...") in C++ code is
// FUNCTION scope too): names are interned so a record never points at a dead string
std::mutex names_mu;
std::deque<std::string> names;
std::unordered_map<std::string_view, const char*> interned;

const char* intern(const char* name) {
  std::string_view v(name);
  std::lock_guard<std::mutex> lock(names_mu);
  auto it = interned.find(v);
  if (it != interned.end()) return it->second;
  const std::string& kept = names.emplace_back(v);
  interned.emplace(std::string_view(kept), kept.c_str());
  return kept.c_str();
}

struct SeqCtx : at::ObserverContext {
  uint64_t seq;
  const char* name;
  SeqCtx* parent;
  bool had_child = false;
  SeqCtx(uint64_t s, const char* n, SeqCtx* p) : seq(s), name(n), parent(p) {}
};
thread_local SeqCtx* current = nullptr;

std::unique_ptr<at::ObserverContext> start_noop(const at::RecordFunction&) { return nullptr; }

std::unique_ptr<at::ObserverContext> start_rec(const at::RecordFunction& fn) {
  uint64_t seq = n_ops.fetch_add(1, std::memory_order_relaxed);
  const char* name = intern(fn.name());
  if (fn.needsInputs()) put_values(seq, name, fn.inputs(), true);
  if (current) current->had_child = true;
  auto ctx = std::make_unique<SeqCtx>(seq, name, current);
  current = ctx.get();
  return ctx;
}

void end_rec(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (ctx == nullptr) return;
  auto* c = static_cast<SeqCtx*>(ctx);
  current = c->parent;
  if (!fn.needsOutputs() || (leaf_only && c->had_child)) return;
  const auto& outs = fn.outputs();
  put_values(c->seq, c->name, c10::ArrayRef<const c10::IValue>(outs.data(), outs.size()), false);
}

std::unique_ptr<at::ObserverContext> start_bwd(const at::RecordFunction&) {
  n_bwd_nodes.fetch_add(1, std::memory_order_relaxed);
  bwd_depth++;
  return nullptr;
}
void end_bwd(const at::RecordFunction&, at::ObserverContext*) { bwd_depth--; }

}  // namespace

// variant: 0 = do nothing, 1 = digest outputs, 2 = digest inputs and outputs,
// 3 = capture the outputs and write a record per output tensor, digest nothing,
// 4 = digest the outputs of leaf ops only (no op started inside them), views skipped;
// track_backward: also observe autograd nodes (BACKWARD_FUNCTION) to tag the ops inside
void install(int64_t variant, bool track_backward) {
  TORCH_CHECK(!installed, "observer already installed");
  TORCH_CHECK(variant >= 0 && variant <= 4, "variant must be 0 to 4");
  do_digest = variant != 3;
  leaf_only = variant == 4;
  at::RecordFunctionCallback cb = variant == 0 ? at::RecordFunctionCallback(start_noop)
                                               : at::RecordFunctionCallback(start_rec, end_rec);
  cb.scopes({at::RecordScope::FUNCTION}).needsOutputs(variant != 0).needsInputs(variant == 2);
  handle = at::addGlobalCallback(cb);
  if (track_backward) {
    bwd_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(start_bwd, end_bwd).scopes({at::RecordScope::BACKWARD_FUNCTION}));
  }
  installed = true;
}

void uninstall() {
  if (!installed) return;
  at::removeCallback(handle);
  if (bwd_handle) at::removeCallback(bwd_handle);
  handle = bwd_handle = 0;
  installed = false;
}

void reset() { n_rec = 0; n_ops = 0; n_bwd_nodes = 0; n_bytes = 0; n_copies = 0; }

// (ops observed, records written, autograd nodes seen, bytes digested, tensors copied to digest)
std::vector<int64_t> counts() {
  return {static_cast<int64_t>(n_ops.load()), static_cast<int64_t>(n_rec.load()), static_cast<int64_t>(n_bwd_nodes.load()),
          static_cast<int64_t>(n_bytes.load()), static_cast<int64_t>(n_copies.load())};
}

// the first min(records, capacity) records: (seq, op name, digest, slot, inside backward)
std::vector<std::tuple<int64_t, std::string, uint64_t, int64_t, bool>> records() {
  std::vector<std::tuple<int64_t, std::string, uint64_t, int64_t, bool>> out;
  size_t n = std::min<uint64_t>(n_rec.load(), CAP);
  out.reserve(n);
  for (size_t i = 0; i < n; i++) {
    const Rec& r = buf[i];
    out.emplace_back(static_cast<int64_t>(r.seq), r.name ? r.name : "", r.digest, r.slot, r.in_bwd != 0);
  }
  return out;
}

uint64_t digest_of(const at::Tensor& t) { return digest_tensor(t); }
