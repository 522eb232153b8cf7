#pragma once
// Anonymous memory in transparent huge pages where the kernel allows: one fault backs 2 MiB
// instead of 4 KiB, and long scans miss the TLB far less. Zeroed, and backed only as it is
// first written.

#include <cstddef>
#include <memory>

#include <sys/mman.h>

namespace strata::model {

/// Unmaps what map_huge_pages mapped.
struct unmap_pages {
  std::size_t bytes = 0;
  void operator()(std::byte* p) const noexcept { ::munmap(p, bytes); }
};

using huge_pages = std::unique_ptr<std::byte[], unmap_pages>;

/// n bytes, or an empty pointer when they cannot be mapped.
inline huge_pages map_huge_pages(std::size_t n) {
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return {};
  ::madvise(p, n, MADV_HUGEPAGE);
  return huge_pages(static_cast<std::byte*>(p), unmap_pages{n});
}

}  // namespace strata::model
