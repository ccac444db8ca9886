// Adding a field without a narrowing rule must not compile. Built twice by
// ctest: with PSYCH_GIVE_RULE the field's type has a rule and it compiles;
// without it the compiler must reject the narrow() call.
#include "psych/limits.hpp"

struct plain_limits {
  psych::cap<psych::limit_name::cpu_seconds, double> cpu_seconds = 1.0;
#ifdef PSYCH_GIVE_RULE
  psych::cap<psych::limit_name::wall_seconds, double> wall_seconds = 1.0;
#else
  double wall_seconds = 1.0;  // no narrow_field overload exists for a bare double
#endif
};
BOOST_HANA_ADAPT_STRUCT(plain_limits, cpu_seconds, wall_seconds);

int main() {
  plain_limits a, b;
  psych::narrow(a, b);
}
