#pragma once
// The whole pure policy core in one include. Free of I/O, OS headers,
// RapidJSON and Asio; the contract lives in psych/protocol/, I/O in psych/host/.
#include "psych/budget.hpp"
#include "psych/builtins.hpp"
#include "psych/capture.hpp"
#include "psych/failure.hpp"
#include "psych/failure_decision.hpp"
#include "psych/grading.hpp"
#include "psych/isolation.hpp"
#include "psych/json_text.hpp"
#include "psych/limits.hpp"
#include "psych/output.hpp"
#include "psych/preview.hpp"
#include "psych/reports.hpp"
#include "psych/result.hpp"
#include "psych/sandbox_result.hpp"
#include "psych/terms.hpp"
#include "psych/tool_errors.hpp"
