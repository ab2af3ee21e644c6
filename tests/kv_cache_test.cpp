#include "core/kv_cache.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

TEST(KVCache, AppendAndBytesCountBiasOnlyWhenPresent) {
  KVCache cache(2, 3, 4);
  const float k[4] = {1, 2, 3, 4}, v[4] = {5, 6, 7, 8};
  cache.head(0, 0).append(k, v, 4, 0.0f, 0);
  cache.head(0, 0).append(k, v, 4, 0.0f, 1);
  cache.head(1, 2).append(k, v, 4, 0.5f, 7);
  EXPECT_EQ(cache.head(0, 0).length(), 2u);
  EXPECT_EQ(cache.head(1, 2).positions[0], 7);
  EXPECT_EQ(cache.head(0, 0).keys[5], 2.0f);
  EXPECT_EQ(cache.total_entries(), 3u);
  // 3 entries x (4 + 4) floats, plus 1 beta float for the biased head.
  EXPECT_EQ(cache.bytes(), 3u * 8 * 4 + 1 * 4);
}

TEST(KVCache, BytesWithLengthsIsTheBytesOfACacheOfThoseLengths) {
  KVCache cache(2, 3, 4);
  const float k[4] = {1, 2, 3, 4}, v[4] = {5, 6, 7, 8};
  cache.head(0, 0).append(k, v, 4, 0.0f, 0);
  cache.head(1, 2).append(k, v, 4, 0.5f, 7);  // the one head carrying beta
  const std::vector<int> lengths = {3, 0, 1, 0, 2, 5};
  // By hand: 11 entries x 8 floats x 4 bytes, plus 5 beta floats of head (1, 2).
  EXPECT_EQ(cache.bytes_with_lengths(lengths), 11u * 8 * 4 + 5 * 4);
  // The same cache grown to those lengths.
  KVCache grown = cache;
  for (int i = 0; i < 6; ++i)
    while (static_cast<int>(grown.head(i / 3, i % 3).length()) < lengths[i])
      grown.head(i / 3, i % 3).append(k, v, 4, i == 5 ? 0.25f : 0.0f, 0);
  EXPECT_EQ(grown.bytes(), cache.bytes_with_lengths(lengths));
  EXPECT_THROW((void)cache.bytes_with_lengths({1, 2}), Error);
  EXPECT_THROW((void)cache.bytes_with_lengths({1, 2, 3, 4, 5, -1}), Error);
}

TEST(KVCache, UnknownHeadThrows) {
  KVCache cache(2, 3, 4);
  EXPECT_THROW(cache.head(2, 0), Error);
  EXPECT_THROW(cache.head(0, 3), Error);
  EXPECT_THROW(cache.head(-1, 0), Error);
}

TEST(KVCache, RollbackDropsWhatWasAppendedSinceTheMark) {
  KVCache cache(2, 2, 2);
  const float a[2] = {1, 2}, b[2] = {3, 4};
  cache.head(0, 1).append(a, b, 2, 0.5f, 0);
  cache.next_position = 1;
  const KVCache copy = cache;
  const CacheMark m = cache.mark();
  cache.head(0, 1).append(b, a, 2, 0.0f, 1);
  cache.head(1, 0).append(b, a, 2, 0.0f, 1);
  cache.next_position = 2;
  cache.rollback(m);
  EXPECT_EQ(cache.next_position, 1);
  for (int l = 0; l < 2; ++l)
    for (int g = 0; g < 2; ++g) {
      EXPECT_EQ(cache.head(l, g).keys, copy.head(l, g).keys);
      EXPECT_EQ(cache.head(l, g).values, copy.head(l, g).values);
      EXPECT_EQ(cache.head(l, g).beta, copy.head(l, g).beta);
      EXPECT_EQ(cache.head(l, g).positions, copy.head(l, g).positions);
    }
  // A head shorter than at the mark (replaced, e.g. compacted) and a mark of another shape throw.
  cache.head(0, 1) = HeadCache{};
  EXPECT_THROW(cache.rollback(m), Error);
  KVCache other(1, 2, 2);
  EXPECT_THROW(other.rollback(m), Error);
}

}}  // namespace
}  // namespace kvcompact
