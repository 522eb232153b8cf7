#include "io/ssd/uring.hpp"

#include <cerrno>
#include <cstring>
#include <type_traits>

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

namespace strata::ssd {
namespace {

constexpr std::size_t k_slot_granule = 64 << 10;
// The destructor's bound on waiting for I/O in flight.
constexpr auto k_exit_wait = std::chrono::seconds(10);

template <class... F>
struct overloaded : F... {
  using F::operator()...;
};

}  // namespace

result<std::unique_ptr<uring>> uring::create(unsigned slots) {
  if (slots == 0) return fail(errc::invalid_argument, "io_uring needs at least one slot");
  std::unique_ptr<uring> u(new uring());
  u->slots_.resize(slots);
  if (int rc = io_uring_queue_init(slots, &u->ring_, 0); rc < 0) {
    return fail(errc::io_error, "io_uring_queue_init: ", std::strerror(-rc));
  }
  u->ring_ready_ = true;
  u->event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (u->event_fd_ < 0) return fail(errc::io_error, "eventfd: ", std::strerror(errno));
  if (int rc = io_uring_register_eventfd(&u->ring_, u->event_fd_); rc < 0) {
    return fail(errc::io_error, "io_uring_register_eventfd: ", std::strerror(-rc));
  }
  if (int rc = io_uring_register_buffers_sparse(&u->ring_, slots); rc < 0) {
    spdlog::info("ssd: io_uring fixed buffers unavailable ({}); using plain reads and writes", std::strerror(-rc));
    u->fixed_warned_ = true;
  } else {
    u->fixed_ = true;
  }
  return u;
}

uring::~uring() {
  if (ring_ready_) {
    submit();
    auto deadline = std::chrono::steady_clock::now() + k_exit_wait;
    std::vector<io_done> done;
    while (in_flight_ > 0 && std::chrono::steady_clock::now() < deadline) {
      wait(deadline);
      reap(done);
      done.clear();
    }
    if (in_flight_ > 0) {
      spdlog::warn("ssd: {} I/Os still in flight after {} s; leaking their buffers", in_flight_,
                   std::chrono::duration_cast<std::chrono::seconds>(k_exit_wait).count());
    }
    // Exiting the ring drops the kernel's hold on the registered buffers.
    io_uring_queue_exit(&ring_);
  }
  for (auto& s : slots_) {
    if (s.data && !s.busy) ::munmap(s.data, s.bytes);
  }
  if (event_fd_ >= 0) ::close(event_fd_);
}

bool uring::reserve(unsigned index, std::size_t bytes) {
  auto& s = slots_[index];
  if (s.bytes >= bytes) return true;
  if (s.busy) return false;
  std::size_t want = (bytes + k_slot_granule - 1) / k_slot_granule * k_slot_granule;
  void* p = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  if (s.data) {
    unregister(index);
    ::munmap(s.data, s.bytes);
    mapped_bytes_ -= s.bytes;
  }
  s.data = static_cast<std::byte*>(p);
  s.bytes = want;
  mapped_bytes_ += want;
  if (fixed_) {
    iovec iov{p, want};
    int rc = io_uring_register_buffers_update_tag(&ring_, index, &iov, nullptr, 1);
    if (rc >= 0) {
      s.registered = true;
    } else if (!fixed_warned_) {
      fixed_warned_ = true;
      spdlog::info("ssd: io_uring cannot register a {} KiB staging buffer ({}); using plain reads and writes for it",
                   want >> 10, std::strerror(-rc));
    }
  }
  return true;
}

void uring::unregister(unsigned index) {
  auto& s = slots_[index];
  if (!s.registered) return;
  iovec empty{nullptr, 0};
  io_uring_register_buffers_update_tag(&ring_, index, &empty, nullptr, 1);
  s.registered = false;
}

void uring::prepare(const io_op& op) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (!sqe) {
    // More SQEs than slots cannot be prepared between submits; submit and take a fresh one.
    io_uring_submit(&ring_);
    prepared_ = 0;
    sqe = io_uring_get_sqe(&ring_);
  }
  unsigned index = std::visit([](const auto& o) { return o.slot; }, op);
  auto& s = slots_[index];
  std::visit(overloaded{
                 [&](const read_op& r) {
                   if (s.registered) {
                     io_uring_prep_read_fixed(sqe, r.fd, s.data, r.length, r.offset, static_cast<int>(index));
                   } else {
                     io_uring_prep_read(sqe, r.fd, s.data, r.length, r.offset);
                   }
                 },
                 [&](const write_op& w) {
                   if (s.registered) {
                     io_uring_prep_write_fixed(sqe, w.fd, s.data, w.length, w.offset, static_cast<int>(index));
                   } else {
                     io_uring_prep_write(sqe, w.fd, s.data, w.length, w.offset);
                   }
                 },
             },
             op);
  io_uring_sqe_set_data64(sqe, index);
  s.busy = true;
  ++in_flight_;
  ++prepared_;
}

void uring::submit() {
  if (prepared_ == 0) return;
  int rc;
  do {
    rc = io_uring_submit(&ring_);
  } while (rc == -EINTR || rc == -EAGAIN);
  prepared_ = 0;
}

void uring::reap(std::vector<io_done>& out) {
  io_uring_cqe* cqe = nullptr;
  while (io_uring_peek_cqe(&ring_, &cqe) == 0 && cqe) {
    auto index = static_cast<unsigned>(io_uring_cqe_get_data64(cqe));
    out.push_back({index, cqe->res});
    io_uring_cqe_seen(&ring_, cqe);
    if (index < slots_.size() && slots_[index].busy) {
      slots_[index].busy = false;
      --in_flight_;
    }
  }
}

void uring::wait(std::chrono::steady_clock::time_point deadline) {
  auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return;
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  __kernel_timespec ts{};
  ts.tv_sec = ns / 1'000'000'000;
  ts.tv_nsec = ns % 1'000'000'000;
  io_uring_cqe* cqe = nullptr;
  io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);  // the cqe stays for reap()
}

void uring::clear_event() {
  eventfd_t value;
  while (::eventfd_read(event_fd_, &value) == 0) {
  }
}

void uring::signal() { ::eventfd_write(event_fd_, 1); }

}  // namespace strata::ssd
