// AddressMemo (core/address_memo.hpp): a value found by its object's address while the object
// lives, never for another object, and the entries of objects gone dropped as the map grows.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/address_memo.hpp"

namespace test_address_memo {

TEST(AddressMemo, FindsAValueForItsLiveObjectOnlyAndDropsThoseOfObjectsGone) {
  kiln::AddressMemo<const int, int> memo;
  auto a = std::make_shared<const int>(1), b = std::make_shared<const int>(2);
  memo.insert(a, 10);
  ASSERT_NE(memo.find(a), nullptr);
  EXPECT_EQ(*memo.find(a), 10);
  EXPECT_EQ(memo.find(b), nullptr);
  // another shared_ptr to the same object finds it; one owning another object at that address
  // (aliasing constructor) does not
  std::shared_ptr<const int> same = a;
  EXPECT_NE(memo.find(same), nullptr);
  std::shared_ptr<const int> alias(b, a.get());
  EXPECT_EQ(memo.find(alias), nullptr);
  memo.insert(a, 11);  // replaced
  EXPECT_EQ(*memo.find(a), 11);
  // many objects come and go: the live one stays found, whatever the scans dropped
  for (int i = 0; i < 1000; ++i) {
    auto t = std::make_shared<const int>(i);
    memo.insert(t, i);
    EXPECT_EQ(*memo.find(t), i);
  }
  EXPECT_EQ(*memo.find(a), 11);
}

}  // namespace test_address_memo
