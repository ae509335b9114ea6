// The rows a paged decode prefetches (src/attention/kv_rows.hpp). A prefetch at a wrong address
// changes no result, so no attention test can see one: this one checks the addresses. A task
// reads its heads' rows a group of pages at a time, each head's run of every page of the group in
// turn; Ahead::spread must name the rows read `distance` rows later in that order, wherever the
// block table put them, or nothing where they do not lie n at a stride (a page boundary, the
// sequence's end); and a short call's kernels must be handed them (Ahead::after).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "src/attention/kv_rows.hpp"

namespace kv_rows_test {

namespace {

using tessera::detail::fa::Ahead;
using tessera::detail::fa::KvRows;

constexpr int64_t kHeads = 3, kPage = 16, kD = 32, kPages = 12;
constexpr int64_t kEnd = kPages * kPage - 5;  // the last page partly filled

struct Pool {
  std::vector<int32_t> table;
  std::vector<uint16_t> values = std::vector<uint16_t>(size_t(kPages * kHeads * kPage * kD));
  int64_t stride[3] = {kHeads * kPage * kD, kPage* kD, kD};  // [page][head][row][dim]
  tessera_attention_desc d{};
  std::vector<KvRows> rows;
  std::vector<const KvRows*> order;

  explicit Pool(uint32_t seed) : table(size_t(kPages) + 1, -1) {  // an unused entry past the end
    std::iota(table.begin(), table.end() - 1, 0);
    std::shuffle(table.begin(), table.end() - 1, std::mt19937(seed));
    d.block_table = table.data(), d.page_size = kPage;
    for (int64_t h = 0; h < kHeads; ++h)
      rows.emplace_back(d, values.data(), TESSERA_F16, stride, 0, h, kD, nullptr, kEnd);
    for (const KvRows& r : rows) order.push_back(&r);
  }
};

TEST(KvRows, SpreadNamesTheRowsReadDistanceLaterInReadingOrder) {
  const Pool pool(7);
  int64_t checked = 0, named = 0;
  for (const int64_t heads : {int64_t(1), kHeads})
    for (const int64_t group : {1, 2, 4})
      for (const int64_t distance : {16, 24, 32, 64}) {
        // The reading order of every full page's rows: (head, row) pairs.
        std::vector<std::pair<int64_t, int64_t>> read;
        for (int64_t g0 = 0; g0 < kPages; g0 += group)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t p = g0; p < g0 + group; ++p)
              for (int64_t r = 0; r < kPage; ++r) read.emplace_back(h, p * kPage + r);
        for (size_t at = 0; at < read.size(); ++at) {
          const auto [h, j] = read[at];
          const int64_t page = j / kPage, lo = page * kPage;
          Ahead a{&pool.rows[size_t(h)], 0};
          a.order = pool.order.data(), a.heads = heads, a.h = h, a.pages = group;
          a.g = page % group, a.lo = lo, a.m = kPage, a.distance = distance;
          for (const int64_t n : {int64_t(1), int64_t(4), lo + kPage - j}) {
            if (j + n > lo + kPage) continue;
            SCOPED_TRACE(testing::Message()
                         << "heads " << heads << " group " << group << " distance " << distance
                         << " head " << h << " row " << j << " n " << n);
            // Rows n at a stride: one head's, in one page, before the sequence's end.
            const size_t to = at + size_t(distance);
            const bool lies = to + size_t(n) <= read.size() &&
                              read[to + size_t(n) - 1].first == read[to].first &&
                              read[to + size_t(n) - 1].second == read[to].second + n - 1 &&
                              read[to].second / kPage == (read[to].second + n - 1) / kPage &&
                              read[to].second + n <= kEnd;
            const tessera::arch::RowsAhead got = a.spread(j, n);
            ++checked;
            if (!lies) {
              EXPECT_EQ(got.at, nullptr);
              continue;
            }
            ++named;
            const KvRows& r = pool.rows[size_t(read[to].first)];
            EXPECT_EQ(got.at, r.row8(read[to].second));
            EXPECT_EQ(got.ld, r.ld_bytes());
            // A short call's kernels are handed those rows to spread over their loop.
            const tessera::arch::NextRows next = a.after(j, n, true);
            EXPECT_EQ(next.spread, got.at);
            EXPECT_EQ(next.spread_rows, n);
          }
        }
      }
  EXPECT_GT(named, checked / 2);  // the sweep reaches the rows, not only the boundaries
}

}  // namespace

}  // namespace kv_rows_test
