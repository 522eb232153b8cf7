#pragma once
// deferred_saves: the blocks the SSD tier did not write because it had stopped writing (a full
// disk), kept by hash with what a save needs, in the order they came. When the tier writes again,
// those RAM still holds are saved; those it evicted meanwhile are lost (never on disk). Plain
// class, no Asio: the scheduler owns one beside its block pool.

#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "src/kv/kv_cache_manager.hpp"
#include "src/kv/block_pool.hpp"
#include "src/kv/prefix_hash.hpp"

namespace strata::sched {

using kv::save_item;

class deferred_saves {
 public:
  /// Keeps a save for later (its block id is looked up again then). A hash kept already is
  /// ignored.
  void add(save_item item);

  /// The saves to make now, oldest first, each with the block that holds its hash today, while
  /// their blocks' bytes stay within max_bytes (always at least one). Hashes the pool no longer
  /// holds are taken too and appended to `lost`.
  std::vector<save_item> take(const kv::block_pool& pool, std::int64_t max_bytes, std::vector<kv::block_hash>& lost);

  /// Drops (into `lost`) the saves whose blocks the pool has evicted, once more are kept than the
  /// pool has blocks: what waits for the disk stays within the RAM that holds it.
  void prune(const kv::block_pool& pool, std::vector<kv::block_hash>& lost);

  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

 private:
  std::vector<save_item> items_;
  std::unordered_set<kv::block_hash, kv::block_hash_hasher> hashes_;
};

}  // namespace strata::sched
