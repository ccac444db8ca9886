#pragma once
// The one result alias of psych, in the spirit of Outcome's std_result.hpp:
// a tiny header that picks an explicit no-value policy. Reading the value of
// a failed result (or the error of a successful one) is a bug, not an
// expected failure, so it traps instead of being undefined behaviour.
#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/terminate.hpp>
#include <boost/outcome/success_failure.hpp>
#include <boost/outcome/try.hpp>

#include "psych/error.hpp"

namespace psych {

template <class T>
using result = boost::outcome_v2::basic_result<T, error, boost::outcome_v2::policy::terminate>;

using boost::outcome_v2::success;

/// A failed result, with the named kind and a detail for the reader.
inline auto fail_with(error_kind kind, std::string detail = {}) {
  return boost::outcome_v2::failure(error{kind, std::move(detail)});
}

}  // namespace psych

#define PSYCH_TRY BOOST_OUTCOME_TRY
