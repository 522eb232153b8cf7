#pragma once
// small_disk: a small ext4 file system in an image file, loop-mounted for a test that needs a disk
// that really fills up (ENOSPC) and then has room again. Needs root, mkfs.ext4 and loop devices;
// without them unavailable() says why, for GTEST_SKIP.

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace strata::ssd::testing {

class small_disk {
 public:
  /// Makes an image of `bytes` at work/fs.img (no blocks reserved for root) and mounts it on
  /// work/mnt.
  explicit small_disk(const std::filesystem::path& work, std::uint64_t bytes = 16ull << 20)
      : image_(work / "fs.img"), path_(work / "mnt") {
    if (::geteuid() != 0) {
      why_ = "needs root to loop-mount a small ext4 image";
      return;
    }
    std::filesystem::create_directories(path_);
    const std::string make = "truncate -s " + std::to_string(bytes) + " " + image_.string() + " && mkfs.ext4 -q -F -m 0 " +
                             image_.string() + " >/dev/null 2>&1";
    if (std::system(make.c_str()) != 0) {
      why_ = "mkfs.ext4 is not available";
      return;
    }
    const std::string mount = "mount -o loop " + image_.string() + " " + path_.string() + " >/dev/null 2>&1";
    if (std::system(mount.c_str()) != 0) {
      why_ = "mount -o loop does not work here";
      return;
    }
    mounted_ = true;
  }

  /// Unmounts; whatever still has a file open there must be closed first.
  ~small_disk() {
    if (!mounted_) return;
    const std::string cmd = "umount " + path_.string();
    if (std::system(cmd.c_str()) != 0) std::cerr << "could not unmount " << path_ << "\n";
  }
  small_disk(const small_disk&) = delete;
  small_disk& operator=(const small_disk&) = delete;

  /// Empty when mounted; else why not.
  const std::string& unavailable() const { return why_; }
  /// The mounted file system's root.
  const std::filesystem::path& path() const { return path_; }

  /// Takes `bytes` more for a filler file, or every free block when bytes is left out. Blocks are
  /// allocated (fallocate), not written: nothing is held back in the page cache to be given back
  /// later, so the disk stays exactly this full.
  void fill(std::uint64_t bytes = std::numeric_limits<std::uint64_t>::max()) {
    const int fd = ::open((path_ / "filler").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ::sync();
    off_t end = ::lseek(fd, 0, SEEK_END);
    for (std::uint64_t step : {std::uint64_t{1} << 20, std::uint64_t{64} << 10, std::uint64_t{4} << 10}) {
      while (bytes > 0) {
        const auto n = static_cast<off_t>(std::min(bytes, step));
        if (::fallocate(fd, 0, end, n) != 0) break;  // ENOSPC: no run of n bytes left
        end += n;
        bytes -= static_cast<std::uint64_t>(n);
      }
    }
    ::fsync(fd);
    ::close(fd);
    ::sync();
  }

  /// Removes the filler: the space is free again.
  void free() {
    std::error_code ec;
    std::filesystem::remove(path_ / "filler", ec);
    ::sync();
  }

 private:
  std::filesystem::path image_;
  std::filesystem::path path_;
  std::string why_;
  bool mounted_ = false;
};

}  // namespace strata::ssd::testing
